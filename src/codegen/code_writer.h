// Source text with its indentation kept by scope, for every backend's printer: block("for (...)")
// writes the head with `{`, lines written while the returned Scope lives are one step deeper,
// and the `}` comes when it ends. No printer passes indentation around by hand.
#pragma once

#include <string>
#include <string_view>

namespace coil::codegen {

class CodeWriter {
 public:
  // `depth`: the indentation (in steps of two spaces) of the first line.
  explicit CodeWriter(int depth = 0) : depth_(depth) {}

  // One line at the current indentation.
  void line(std::string_view text) {
    out_.append(2 * static_cast<size_t>(depth_), ' ');
    out_.append(text);
    out_ += '\n';
  }

  // Ends a block or an indentation when it goes out of scope.
  class [[nodiscard]] Scope {
   public:
    Scope(CodeWriter& w, bool brace) : w_(&w), brace_(brace) { ++w.depth_; }
    Scope(Scope&& o) noexcept : w_(o.w_), brace_(o.brace_) { o.w_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (!w_) return;
      --w_->depth_;
      if (brace_) w_->line("}");
    }

   private:
    CodeWriter* w_;
    bool brace_;
  };
  // `head {` (or a bare `{`), then the lines of the scope, then `}`.
  Scope block(std::string_view head = "") {
    line(head.empty() ? std::string("{") : std::string(head) + " {");
    return Scope(*this, true);
  }

  const std::string& text() const { return out_; }

 private:
  std::string out_;
  int depth_;
};

}  // namespace coil::codegen

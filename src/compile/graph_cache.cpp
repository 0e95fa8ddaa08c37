#include "compile/graph_cache.h"

#include <dlfcn.h>
#include <link.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include <coil/error.h>
#include <coil/ops.h>

#include "compile/compile_settings.h"
#include "debug/log.h"
#include "graph/printer.h"
#include "jit/cache_key.h"
#include "jit/cache_prune.h"
#include "jit/disk_cache.h"
#include "support/config.h"

namespace coil {

using jit::cache_entry;
using jit::CacheEntry;
using jit::file_identity;
using jit::Hasher;
using jit::open_cache_entry;
using jit::to_hex;
using jit::write_file_atomically;

namespace {

using nlohmann::json;

// Bump when the entries' layout or the meaning of a key changes.
constexpr const char* kFormat = "coil-graph-8";
constexpr const char* kArea = "graphs";

// Thrown while writing an entry down: what the cache cannot keep.
struct NotCacheable {
  std::string why;
};

// The GNU build ID of the loaded object that holds `address`, or "": a hash the linker
// computed over the object's contents, read from its notes in memory (no file is opened).
std::string build_id_of(const void* address) {
  struct Search {
    uintptr_t address;
    std::string id;
  } search{reinterpret_cast<uintptr_t>(address), ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        bool holds = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          holds |= ph.p_type == PT_LOAD && s->address >= start && s->address < start + ph.p_memsz;
        }
        if (!holds) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((note->n_namesz + 3) & ~size_t{3});
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0)
              s->id = to_hex(desc, note->n_descsz);
            p = desc + ((note->n_descsz + 3) & ~size_t{3});
          }
        }
        return 1;
      },
      &search);
  return search.id;
}

// What coil's own code is: the build ID of libcoil.so (or of the program coil is linked into),
// else that file's path, size and modification time. Rebuilding coil changes it.
const std::string& coil_identity() {
  static const std::string id = [] {
    const void* code = reinterpret_cast<const void*>(&graph_cache_key);
    if (std::string build_id = build_id_of(code); !build_id.empty()) return "build-id " + build_id;
    Dl_info info{};
    std::string file = dladdr(code, &info) && info.dli_fname ? file_identity(info.dli_fname) : "";
    return file.empty() ? file_identity("/proc/self/exe") : file;
  }();
  return id;
}

bool cache_enabled() { return config::flag(config::Var::GraphCache) && !coil_identity().empty(); }

std::vector<const Node*> parameters(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (n->kind() == NodeKind::Parameter) out.push_back(n);
  return out;
}

// ---- writing down

// A size: a number, or (a dynamic graph's) an expression over s0, s1, ... as text.
json expr_json(sym::Expr e) {
  if (e->is_const()) return e->value();
  return sym::to_string(e);
}

json exprs_json(const SymShape& s) {
  json out = json::array();
  for (sym::Expr e : s) out.push_back(expr_json(e));
  return out;
}

json launch_json(const codegen::Launch& l) {
  return json::array({expr_json(l.grid), l.block, l.shared});
}

json layout_json(const ir::Layout& l) {
  return json::array(
      {dtype_name(l.dtype), exprs_json(l.sizes), exprs_json(l.strides), expr_json(l.offset)});
}

json ref_json(const ir::TensorRef& r) { return json::array({r.buffer, layout_json(r.view)}); }

uint64_t bits(double d) { return std::bit_cast<uint64_t>(d); }

// [alternative, value]: doubles as their bits, so NaN, infinities and every last digit survive.
json arg_json(const Arg& a) {
  json out = json::array({a.index()});
  std::visit(
      [&]<typename T>(const T& v) {
        if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (std::is_same_v<T, Tensor> || std::is_same_v<T, std::vector<Tensor>>) {
          throw NotCacheable{"an extern call takes a tensor literal"};
        } else if constexpr (std::is_same_v<T, Scalar>) {
          out.push_back(static_cast<int>(v.kind()));
          out.push_back(v.is_floating() ? bits(v.to_double()) : static_cast<uint64_t>(v.to_int()));
        } else if constexpr (std::is_same_v<T, double>) {
          out.push_back(bits(v));
        } else if constexpr (std::is_same_v<T, DType>) {
          out.push_back(dtype_name(v));
        } else if constexpr (std::is_same_v<T, Device>) {
          out.push_back(v.str());
        } else if constexpr (std::is_same_v<T, SymIntArg>) {
          out.push_back(v.hint);
          out.push_back(expr_json(v.expr));
        } else if constexpr (std::is_same_v<T, SymIntsArg>) {
          out.push_back(v.hints);
          out.push_back(exprs_json(v.exprs));
        } else {
          out.push_back(v);  // int64, bool, Shape, string
        }
      },
      a);
  return out;
}

json call_json(const ir::ExternCall& c) {
  json args = json::array();
  for (const ir::ExternArg& a : c.args) {
    if (auto* r = std::get_if<ir::TensorRef>(&a)) {
      args.push_back({{"ref", ref_json(*r)}});
    } else if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&a)) {
      json refs = json::array();
      for (const ir::TensorRef& r : *rs) refs.push_back(ref_json(r));
      args.push_back({{"refs", refs}});
    } else {
      args.push_back({{"arg", arg_json(std::get<Arg>(a))}});
    }
  }
  json j = {{"op", op_name(c.op)}, {"args", args}, {"reason", c.reason}};
  if (c.result > 0) j["result"] = {c.result, c.first};
  return j;
}

// A constant buffer: one of the graph's parameters by position, else its elements.
json constant_json(const Tensor& value, const std::vector<const Node*>& params) {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i]->value().is_same(value)) return {{"parameter", i}};
  if (!value.is_contiguous())
    throw NotCacheable{"a constant that is not a parameter is not contiguous"};
  return {{"dtype", dtype_name(value.dtype())},
          {"sizes", value.sizes()},
          {"elements",
           to_hex(value.data_ptr(), static_cast<size_t>(value.numel()) * itemsize(value.dtype()))}};
}

json plan_json(const codegen::WrapperPlan& plan, const Graph& graph) {
  std::vector<const Node*> params = parameters(graph);
  json slots = json::array();
  for (const codegen::WrapperPlan::Slot& s : plan.slots) {
    json j = {
        {"name", s.name}, {"kind", static_cast<int>(s.kind)}, {"layout", layout_json(s.layout)}};
    if (s.kind == ir::BufferKind::Input) j["input"] = s.input_index;
    if (s.kind == ir::BufferKind::Constant) j["constant"] = constant_json(s.value, params);
    if (s.call) j["call"] = call_json(*s.call);
    slots.push_back(std::move(j));
  }
  json steps = json::array();
  for (const codegen::WrapperPlan::Step& st : plan.steps) {
    json allocs = json::array(), checks = json::array();
    for (const codegen::WrapperPlan::Alloc& a : st.allocs)
      allocs.push_back({a.slot, a.reuse, a.in_place});
    for (const codegen::IndexCheck& c : st.index_checks)
      checks.push_back(json::array({c.op, expr_json(c.bound)}));
    json alternatives = json::array();
    for (const codegen::WrapperPlan::Step::Alternative& a : st.alternatives)
      alternatives.push_back({a.kernel, exprs_json(a.divisors), launch_json(a.launch)});
    steps.push_back({{"kernel", st.kernel},
                     {"args", st.args},
                     {"checks", checks},
                     {"extern", st.extern_slot},
                     {"allocs", allocs},
                     {"releases", st.releases},
                     {"dead", st.dead},
                     {"symbols", st.symbols},
                     {"divisors", exprs_json(st.divisors)},
                     {"launch", launch_json(st.launch)},
                     {"alternatives", alternatives}});
  }
  json outputs = json::array();
  for (const codegen::WrapperPlan::Output& o : plan.outputs)
    outputs.push_back({o.slot, layout_json(o.view)});
  json sizes = json::array();
  for (const codegen::WrapperPlan::SizeSource& s : plan.sizes)
    sizes.push_back(json::array({s.symbol, s.input, s.dim, s.stride}));
  return {{"device", plan.device.str()},
          {"sizes", sizes},
          {"slots", slots},
          {"steps", steps},
          {"outputs", outputs}};
}

// ---- reading back (nlohmann throws on anything malformed: the caller counts it a miss)

sym::Expr expr_of(const json& j) {
  if (j.is_number_integer()) return sym::constant(j.get<int64_t>());
  return sym::parse(j.get<std::string>(), [](const std::string& name) -> sym::Expr {
    if (name.size() < 2 || name[0] != 's' ||
        name.find_first_not_of("0123456789", 1) != std::string::npos)
      return nullptr;
    return sym::size_var(name);
  });
}

SymShape exprs_of(const json& j) {
  SymShape out;
  for (const json& e : j) out.push_back(expr_of(e));
  return out;
}

codegen::Launch launch_of(const json& j) {
  return {expr_of(j.at(0)), j.at(1).get<int64_t>(), j.at(2).get<int64_t>()};
}

ir::Layout layout_of(const json& j) {
  return {dtype_from_name(j.at(0).get<std::string>()), exprs_of(j.at(1)), exprs_of(j.at(2)),
          expr_of(j.at(3))};
}

ir::TensorRef ref_of(const json& j) { return {j.at(0).get<std::string>(), layout_of(j.at(1))}; }

Arg arg_of(const json& j) {
  auto as_double = [](const json& v) { return std::bit_cast<double>(v.get<uint64_t>()); };
  switch (j.at(0).get<size_t>()) {
    case 0:
      return std::monostate{};
    case 3: {
      auto kind = static_cast<Scalar::Kind>(j.at(1).get<int>());
      if (kind == Scalar::Kind::Float) return Scalar(as_double(j.at(2)));
      if (kind == Scalar::Kind::Bool) return Scalar(j.at(2).get<uint64_t>() != 0);
      return Scalar(static_cast<int64_t>(j.at(2).get<uint64_t>()));
    }
    case 4:
      return j.at(1).get<int64_t>();
    case 5:
      return as_double(j.at(1));
    case 6:
      return j.at(1).get<bool>();
    case 7:
      return j.at(1).get<Shape>();
    case 8:
      return dtype_from_name(j.at(1).get<std::string>());
    case 9:
      return j.at(1).get<std::string>();
    case 10:
      return Device(j.at(1).get<std::string>());
    case 11:
      return SymIntArg{j.at(1).get<int64_t>(), expr_of(j.at(2))};
    case 12:
      return SymIntsArg{j.at(1).get<Shape>(), exprs_of(j.at(2))};
  }
  throw std::runtime_error("an argument of unknown kind");
}

ir::ExternCall call_of(const json& j) {
  ir::ExternCall c;
  std::optional<OpId> op = find_op(j.at("op").get<std::string>());
  if (!op) throw std::runtime_error("an unknown op");
  c.op = *op;
  c.reason = j.at("reason").get<std::string>();
  if (j.contains("result")) {
    c.result = j.at("result").at(0).get<int64_t>();
    c.first = j.at("result").at(1).get<std::string>();
    if (c.result < 1 || !op_info(c.op).returns_list() || c.first.empty())
      throw std::runtime_error("an extern result the op does not have");
  }
  for (const json& a : j.at("args")) {
    if (a.contains("ref")) {
      c.args.emplace_back(ref_of(a.at("ref")));
    } else if (a.contains("refs")) {
      std::vector<ir::TensorRef> refs;
      for (const json& r : a.at("refs")) refs.push_back(ref_of(r));
      c.args.emplace_back(std::move(refs));
    } else {
      c.args.emplace_back(arg_of(a.at("arg")));
    }
  }
  return c;
}

Tensor constant_of(const json& j, const std::vector<const Node*>& params) {
  if (j.contains("parameter")) return params.at(j.at("parameter").get<size_t>())->value();
  Tensor t = empty(j.at("sizes").get<Shape>(), dtype_from_name(j.at("dtype").get<std::string>()));
  const std::string& elements = j.at("elements").get_ref<const std::string&>();
  size_t size = static_cast<size_t>(t.numel()) * itemsize(t.dtype());
  if (elements.size() != 2 * size) throw std::runtime_error("a constant of the wrong size");
  auto nibble = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw std::runtime_error("a constant that is not hex");
  };
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (size_t i = 0; i < size; ++i)
    p[i] = static_cast<unsigned char>(nibble(elements[2 * i]) << 4 | nibble(elements[2 * i + 1]));
  return t;
}

codegen::WrapperPlan plan_of(const json& j, const Graph& graph) {
  std::vector<const Node*> params = parameters(graph);
  codegen::WrapperPlan plan;
  plan.device = Device(j.at("device").get<std::string>());
  for (const json& s : j.at("sizes")) {
    plan.sizes.push_back(
        {s.at(0).get<int>(), s.at(1).get<int>(), s.at(2).get<int>(), s.at(3).get<bool>()});
    if (plan.sizes.back().symbol < 0 || plan.sizes.back().symbol > 4096)
      throw std::runtime_error("a size symbol out of range");
    plan.num_sizes = std::max(plan.num_sizes, plan.sizes.back().symbol + 1);
  }
  for (const json& s : j.at("slots")) {
    codegen::WrapperPlan::Slot slot;
    slot.name = s.at("name").get<std::string>();
    int kind = s.at("kind").get<int>();
    if (kind < 0 || kind > static_cast<int>(ir::BufferKind::Extern))
      throw std::runtime_error("a buffer of unknown kind");
    slot.kind = static_cast<ir::BufferKind>(kind);
    slot.layout = layout_of(s.at("layout"));
    if (s.contains("input")) slot.input_index = s.at("input").get<int64_t>();
    if (s.contains("constant")) slot.value = constant_of(s.at("constant"), params);
    if (s.contains("call")) slot.call = call_of(s.at("call"));
    plan.slots.push_back(std::move(slot));
  }
  // Checked as the wrapper will use them, so that a damaged entry is a miss, never a crash.
  std::set<std::string> names;
  for (const codegen::WrapperPlan::Slot& slot : plan.slots) names.insert(slot.name);
  std::map<std::string, OpId> calls;  // the buffers that make a call, by the op they call
  for (const codegen::WrapperPlan::Slot& slot : plan.slots)
    if (slot.call) {
      for (const std::string& name : ir::extern_inputs(*slot.call))
        if (!names.count(name)) throw std::runtime_error("a call reads an unknown buffer");
      if (slot.call->result == 0) {
        calls[slot.name] = slot.call->op;
      } else if (auto it = calls.find(slot.call->first);
                 it == calls.end() || it->second != slot.call->op) {
        throw std::runtime_error("a call's later result before or without its call");
      }
    }
  auto slot_index = [&](const json& v, bool or_none = false) {
    int i = v.get<int>();
    if (i < (or_none ? -1 : 0) || i >= static_cast<int>(plan.slots.size()))
      throw std::runtime_error("a slot out of range");
    return i;
  };
  for (const json& s : j.at("steps")) {
    codegen::WrapperPlan::Step st;
    st.kernel = s.at("kernel").get<std::string>();
    for (const json& a : s.at("args")) st.args.push_back(slot_index(a));
    for (const json& c : s.at("checks"))
      st.index_checks.push_back({c.at(0).get<std::string>(), expr_of(c.at(1))});
    st.extern_slot = slot_index(s.at("extern"), true);
    if (st.kernel.empty() && (st.extern_slot < 0 || !plan.slots[st.extern_slot].call))
      throw std::runtime_error("an extern step without its call");
    for (const json& a : s.at("allocs"))
      st.allocs.push_back({slot_index(a.at(0)), slot_index(a.at(1), true), a.at(2).get<bool>()});
    for (const json& r : s.at("releases")) st.releases.push_back(slot_index(r));
    for (const json& d : s.at("dead")) st.dead.push_back(slot_index(d));
    st.launch = launch_of(s.at("launch"));
    for (const json& a : s.at("alternatives"))
      st.alternatives.push_back(
          {a.at(0).get<std::string>(), exprs_of(a.at(1)), launch_of(a.at(2))});
    for (const json& k : s.at("symbols")) {
      st.symbols.push_back(k.get<int>());
      if (st.symbols.back() < 0 || st.symbols.back() >= plan.num_sizes)
        throw std::runtime_error("a kernel reads an unknown size");
    }
    st.divisors = exprs_of(s.at("divisors"));
    plan.steps.push_back(std::move(st));
  }
  for (const json& o : j.at("outputs"))
    plan.outputs.push_back({slot_index(o.at(0)), layout_of(o.at(1))});
  return plan;
}

void log_cache(const std::string& what) {
  if (debug::log_enabled("cache")) debug::log("cache", "graph", what);
}

}  // namespace

std::string graph_cache_key(const Graph& graph, const CompileOptions& options) {
  if (!cache_enabled()) return "";
  Hasher h;
  h.add(kFormat);
  h.add(coil_identity());
  h.add(options.backend);
  // mode="max-autotune"'s kernels carry their other launches (KernelSource::alternatives).
  if (autotunes(compile_mode(options.mode))) h.add("launch alternatives");
  // A dynamic graph without its hints: one entry serves every size its guards allow.
  h.add(print_graph(graph, /*hints=*/false));
  // Results written back into inputs may be written into their memory (the plan says so).
  for (const auto& [result, input] : graph.written_back())
    h.add("written back " + std::to_string(result) + " " + std::to_string(input));
  return h.hex();
}

std::optional<CachedGraph> load_cached_graph(const std::string& key, const Graph& graph) {
  CacheEntry place = cache_entry(key, kArea);
  // A damaged file is set aside: a miss now, and the compile stores the entry again.
  auto sealed = [](const std::string& path) -> std::optional<std::string> {
    jit::SealedFile file = jit::read_sealed(path);
    if (file.state == jit::SealedFile::State::damaged) jit::set_aside(path, file.why);
    if (file.state != jit::SealedFile::State::ok) return std::nullopt;
    return std::move(file.contents);
  };
  std::optional<std::string> text = sealed(place.path(".json"));
  if (!text) {
    log_cache("miss " + key);
    return std::nullopt;
  }
  try {
    json j = json::parse(*text);
    if (j.at("format").get<std::string>() != kFormat) throw std::runtime_error("an old format");
    CachedGraph entry{"", plan_of(j.at("plan"), graph), {}};
    for (const json& g : j.at("guards")) {
      const int kind = g.at(0).get<int>();
      if (kind < 0 || kind > static_cast<int>(SymGuard::Kind::Le))
        throw std::runtime_error("a guard of unknown kind");
      entry.guards.push_back({static_cast<SymGuard::Kind>(kind), expr_of(g.at(1)), expr_of(g.at(2)),
                              g.at(3).get<std::string>()});
    }
    if (!entry.guards.empty()) {
      ShapeEnv* env = graph.shape_env().get();
      if (!env) throw std::runtime_error("size guards for a static graph");
      for (const SymGuard& g : entry.guards)
        if (!g.holds(env->hint_values())) {
          log_cache("miss " + key + ": made for sizes where " + g.str());
          return std::nullopt;
        }
      for (const SymGuard& g : entry.guards) env->restore_guard(g);
    }
    if (j.at("kernels").get<bool>()) {
      std::optional<std::string> source = sealed(place.path(".src"));
      if (!source) throw std::runtime_error("its source is missing or damaged");
      entry.source = std::move(*source);
    }
    jit::touch(place.path(".json"));
    log_cache("hit " + key + " (" + place.path(".json") + ")");
    return entry;
  } catch (const std::exception& e) {
    log_cache("miss " + key + ": cannot read " + place.path(".json") + " (" + e.what() + ")");
    return std::nullopt;
  }
}

std::string store_cached_graph(const std::string& key, const Graph& graph,
                               const CachedGraph& entry) {
  json j;
  try {
    json guards = json::array();
    for (const SymGuard& g : entry.guards)
      guards.push_back(
          json::array({static_cast<int>(g.kind), expr_json(g.lhs), expr_json(g.rhs), g.reason}));
    j = {{"format", kFormat},
         {"kernels", !entry.source.empty()},
         {"plan", plan_json(entry.plan, graph)},
         {"guards", guards}};
  } catch (const NotCacheable& e) {
    log_cache("not stored " + key + ": " + e.why);
    return e.why;
  }
  CacheEntry place = open_cache_entry(key, kArea);
  // The source first: an entry is complete once its .json is in place.
  if (!entry.source.empty()) write_file_atomically(place.path(".src"), entry.source, true);
  const std::string text = j.dump();
  write_file_atomically(place.path(".json"), text, true);
  jit::note_cache_growth(static_cast<int64_t>(entry.source.size() + text.size()));
  log_cache("stored " + key + " (" + place.path(".json") + ")");
  return "";
}

}  // namespace coil

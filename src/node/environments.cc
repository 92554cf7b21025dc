#include "node/environments.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/read_file.h"
#include "common/strings.h"

#ifndef GPUFLEET_DATA_DIR
#define GPUFLEET_DATA_DIR "data"
#endif

namespace gpufleet::node {
namespace {

constexpr size_t kMaxPartDigits = 9;  // keeps every part inside an int

const std::vector<std::string> kTopKeys = {"environments"};
const std::vector<std::string> kEntryKeys = {"name",   "pytorch", "cuda", "min_driver", "archs",
                                             "python", "image",   "pip",  "notes"};

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '+';
  });
}

// Walks the document, turning positions into "source:line:col: " prefixes.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  std::string Where(const YAML::Mark& mark) const {
    if (mark.line < 0) return source_ + ": ";
    return source_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
  }
  std::string Where(const YAML::Node& at) const { return Where(at.Mark()); }

  Status Error(const YAML::Node& at, const std::string& msg) const {
    return Status::InvalidArgument(Where(at) + msg);
  }

  // Checks that `node` is a mapping whose keys are all in `known`, each given once.
  Status Keys(const YAML::Node& node, const std::string& what, const std::vector<std::string>& known) const {
    if (!node.IsMap()) return Error(node, what + " must be a mapping (key: value lines)");
    std::vector<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Error(it->first, "unknown key '" + key + "' in " + what + "; known keys: " + Join(known, ", "));
      }
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        return Error(it->first, key + " is given twice in " + what);
      }
      seen.push_back(key);
    }
    return Status::Ok();
  }

  // A text field; an absent or null (`cuda:`) field reads as "".
  Result<std::string> Text(const YAML::Node& entry, const std::string& field) const {
    const YAML::Node n = entry[field];
    if (!n.IsDefined() || n.IsNull()) return std::string();
    if (!n.IsScalar()) return Error(n, field + " must be text, not a list or mapping");
    return std::string(Trim(n.Scalar()));
  }

  // A text field that must hold a version, or be empty.
  Result<std::string> VersionText(const YAML::Node& entry, const std::string& field) const {
    GF_ASSIGN_OR_RETURN(std::string text, Text(entry, field));
    if (!text.empty() && !Version::Parse(text).ok()) {
      return Error(entry[field], field + " '" + text + "' is not a version");
    }
    return text;
  }

  // The archs list: compute capabilities "major.minor", each once.
  Result<std::vector<std::string>> Archs(const YAML::Node& entry) const {
    const YAML::Node n = entry["archs"];
    std::vector<std::string> out;
    if (!n.IsDefined() || n.IsNull()) return out;
    if (!n.IsSequence()) return Error(n, "archs must be a list like [\"8.0\", \"9.0\"]");
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node item = n[i];
      const std::string at = "archs[" + std::to_string(i) + "]";
      if (!item.IsScalar()) return Error(item, at + " must be text like \"8.0\"");
      std::string text(Trim(item.Scalar()));
      Result<Version> v = Version::Parse(text);
      if (!v.ok() || v->parts.size() != 2) {
        return Error(item, at + " '" + text + "' is not a compute capability like 8.0");
      }
      if (std::find(out.begin(), out.end(), text) != out.end()) {
        return Error(item, at + " '" + text + "' is listed twice");
      }
      out.push_back(std::move(text));
    }
    return out;
  }

  Result<Environment> Entry(const YAML::Node& entry) const {
    GF_RETURN_IF_ERROR(Keys(entry, "an environment", kEntryKeys));
    Environment env;
    GF_ASSIGN_OR_RETURN(env.name, Text(entry, "name"));
    if (env.name.empty()) return Error(entry, "name is missing");
    if (!ValidName(env.name)) {
      return Error(entry["name"], "name '" + env.name + "' must be letters, digits and - _ . + (at most 128)");
    }
    const std::string of = " (" + env.name + ")";
    GF_ASSIGN_OR_RETURN(env.pytorch, VersionText(entry, "pytorch"));
    if (env.pytorch.empty()) return Error(entry, "pytorch is missing" + of);
    GF_ASSIGN_OR_RETURN(env.cuda, VersionText(entry, "cuda"));
    GF_ASSIGN_OR_RETURN(env.min_driver, VersionText(entry, "min_driver"));
    GF_ASSIGN_OR_RETURN(env.archs, Archs(entry));
    GF_ASSIGN_OR_RETURN(env.python, Text(entry, "python"));
    GF_ASSIGN_OR_RETURN(env.image, Text(entry, "image"));
    GF_ASSIGN_OR_RETURN(env.pip, Text(entry, "pip"));
    GF_ASSIGN_OR_RETURN(env.notes, Text(entry, "notes"));
    if (env.pip.empty()) return Error(entry, "pip is missing" + of + "; give the install line");
    if (env.cpu_only()) {
      // A CPU-only row with a driver or kernels is a half-edited CUDA row: say so, not guess.
      if (!env.min_driver.empty()) {
        return Error(entry["min_driver"], "min_driver is set but cuda is empty" + of +
                                              "; a CPU-only environment needs no driver");
      }
      if (!env.archs.empty()) {
        return Error(entry["archs"], "archs is set but cuda is empty" + of + "; a CPU-only environment has no GPU kernels");
      }
    } else {
      if (env.min_driver.empty()) {
        return Error(entry, "min_driver is missing" + of + "; a CUDA " + env.cuda + " build needs its minimum driver");
      }
      if (env.archs.empty()) {
        return Error(entry, "archs is missing or empty" + of + "; list the compute capabilities the build has kernels for");
      }
    }
    return env;
  }

 private:
  std::string source_;
};

// Whether a build with kernels for `archs` runs on a GPU of capability `cc`: some arch of the
// same major version and a minor version no higher (NVIDIA's cubin compatibility rule).
bool HasKernelsFor(const Version& cc, const std::vector<std::string>& archs) {
  const int major = cc.parts.empty() ? 0 : cc.parts[0];
  const int minor = cc.parts.size() > 1 ? cc.parts[1] : 0;
  for (const std::string& a : archs) {
    Result<Version> v = Version::Parse(a);
    if (!v.ok() || v->parts.empty()) continue;
    const int a_minor = v->parts.size() > 1 ? v->parts[1] : 0;
    if (v->parts[0] == major && a_minor <= minor) return true;
  }
  return false;
}

}  // namespace

Result<Version> Version::Parse(std::string_view text) {
  const std::string_view t = Trim(text);
  auto bad = [&]() {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a version (want digits and dots, like 12.4)");
  };
  if (t.empty()) return bad();
  Version v;
  size_t start = 0;
  while (true) {
    const size_t dot = t.find('.', start);
    const std::string_view part = t.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || part.size() > kMaxPartDigits) return bad();
    int value = 0;
    for (char c : part) {
      if (c < '0' || c > '9') return bad();
      value = value * 10 + (c - '0');
    }
    v.parts.push_back(value);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return v;
}

std::string Version::ToString() const {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '.';
    out += std::to_string(parts[i]);
  }
  return out;
}

std::strong_ordering operator<=>(const Version& a, const Version& b) {
  const size_t n = std::max(a.parts.size(), b.parts.size());
  for (size_t i = 0; i < n; ++i) {
    const int x = i < a.parts.size() ? a.parts[i] : 0;
    const int y = i < b.parts.size() ? b.parts[i] : 0;
    if (x != y) return x <=> y;
  }
  return std::strong_ordering::equal;
}

Result<EnvironmentTable> EnvironmentTable::Parse(const std::string& yaml_text, const std::string& source) {
  const Reader r(source);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(r.Where(e.mark) + "not valid YAML: " + e.msg);
  }
  // yaml-cpp throws on some lookups into malformed trees; the walk below should not reach one,
  // but a throw must become an error here, not escape.
  try {
    if (!root.IsDefined() || root.IsNull()) {
      return Status::InvalidArgument(source + ":1:1: empty; want an `environments:` list");
    }
    GF_RETURN_IF_ERROR(r.Keys(root, "the top level", kTopKeys));
    const YAML::Node list = root["environments"];
    if (!list.IsDefined() || !list.IsSequence()) {
      return r.Error(list.IsDefined() ? list : root, "environments must be a list of environments");
    }
    EnvironmentTable table;
    std::map<std::string, int> first_line;  // name -> line of its first row
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node entry = list[i];
      GF_ASSIGN_OR_RETURN(Environment env, r.Entry(entry));
      const int line = entry["name"].Mark().line + 1;
      if (auto [it, inserted] = first_line.emplace(env.name, line); !inserted) {
        return r.Error(entry["name"],
                       "name '" + env.name + "' is given twice (first on line " + std::to_string(it->second) + ")");
      }
      table.environments_.push_back(std::move(env));
    }
    return table;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(r.Where(e.mark) + e.msg);
  }
}

Result<EnvironmentTable> EnvironmentTable::Load(const std::string& path) {
  auto text = ReadFileText(path);
  if (!text.ok()) {
    const std::string why = "the environment table " + text.status().message();
    return text.status().code() == StatusCode::kNotFound ? Status::NotFound(why) : Status::InvalidArgument(why);
  }
  return Parse(*text, path);
}

std::string EnvironmentTable::DefaultPath() {
  if (const char* env = std::getenv("GPUFLEET_ENVIRONMENTS"); env != nullptr && *env != '\0') return env;
  const std::string local = "data/environments.yaml";
  std::error_code ec;
  if (std::filesystem::exists(local, ec)) return local;
  return std::string(GPUFLEET_DATA_DIR) + "/environments.yaml";
}

Result<EnvironmentTable> EnvironmentTable::LoadDefault() { return Load(DefaultPath()); }

const Environment* EnvironmentTable::Find(std::string_view name) const {
  for (const Environment& e : environments_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Result<const Environment*> EnvironmentTable::Resolve(std::string_view name) const {
  if (const Environment* e = Find(name)) return e;
  std::vector<std::string> known;
  std::string closest;
  size_t best = std::string::npos;
  for (const Environment& e : environments_) {
    known.push_back(e.name);
    // Ties go to the earlier row (the newer build in the shipped order).
    if (const size_t d = EditDistance(name, e.name); d < best) {
      best = d;
      closest = e.name;
    }
  }
  std::string msg = "unknown environment '" + std::string(name) + "'; known: " + Join(known, ", ");
  // A suggestion only where the name is plausibly a misspelling, not an unrelated word.
  if (!closest.empty() && best <= std::max<size_t>(3, name.size() / 3)) msg += " (closest: " + closest + ")";
  return Status::NotFound(msg);
}

std::string EnvironmentTable::WhyNot(const Environment& env, const NodeFacts& node) {
  if (env.cpu_only()) return "";
  const std::string driver_text(Trim(node.driver_version));
  if (driver_text.empty()) {
    return "no NVIDIA driver reported; " + env.name + " needs driver >= " + env.min_driver;
  }
  Result<Version> need = Version::Parse(env.min_driver);
  if (!need.ok()) return env.name + " has no valid min_driver ('" + env.min_driver + "'); fix the environment table";
  Result<Version> driver = Version::Parse(driver_text);
  if (!driver.ok()) {
    return "driver version '" + driver_text + "' reported by the node is not a version; " + env.name +
           " needs driver >= " + env.min_driver;
  }
  if (*driver < *need) {
    return "driver " + driver_text + " too old for CUDA " + env.cuda + " (" + env.name + "); needs >= " +
           env.min_driver;
  }
  if (const std::string cuda_text(Trim(node.cuda_version)); !cuda_text.empty()) {
    Result<Version> have = Version::Parse(cuda_text);
    Result<Version> want = Version::Parse(env.cuda);
    if (!have.ok()) {
      return "CUDA version '" + cuda_text + "' reported by driver " + driver_text + " is not a version; " + env.name +
             " needs CUDA " + env.cuda;
    }
    if (want.ok() && *have < *want) {
      return "driver " + driver_text + " reports CUDA " + cuda_text + ", older than the " + env.cuda + " " + env.name +
             " needs; update the driver to >= " + env.min_driver;
    }
  }
  for (size_t i = 0; i < node.compute_capabilities.size(); ++i) {
    const std::string cc_text(Trim(node.compute_capabilities[i]));
    Result<Version> cc = Version::Parse(cc_text);
    if (!cc.ok()) {
      return "GPU " + std::to_string(i) + " reports compute capability '" + cc_text + "', not a version like 8.0";
    }
    if (!HasKernelsFor(*cc, env.archs)) {
      return "GPU architecture " + cc_text + " (compute capability of GPU " + std::to_string(i) + ") is not in " +
             env.name + "'s builds (" + Join(env.archs, " ") + ")";
    }
  }
  return "";
}

std::vector<std::string> EnvironmentTable::Supported(const NodeFacts& node) const {
  std::vector<std::string> out;
  for (const Environment& e : environments_) {
    if (WhyNot(e, node).empty()) out.push_back(e.name);
  }
  return out;
}

}  // namespace gpufleet::node

#include "parallel/zero/unit_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/error.h"
#include "nn/layers.h"

namespace tandem::parallel {
namespace {

constexpr size_t kNoUnit = std::numeric_limits<size_t>::max();

using PathAndModule = std::pair<std::string, const nn::Module*>;

// The children of `module` in registration order, each Sequential replaced by its elements.
void collect_children(const nn::Module& module, const std::string& prefix,
                      std::vector<PathAndModule>& out) {
  for (const auto& [name, child] : module.children()) {
    if (dynamic_cast<const nn::Sequential*>(child.get()) != nullptr) {
      collect_children(*child, prefix + name + ".", out);
    } else {
      out.emplace_back(prefix + name, child.get());
    }
  }
}

bool has_parameters(const nn::Module& module) {
  return !module.named_parameters().empty();
}

nn::Module* module_at(nn::Module& root, const std::string& path) {
  nn::Module* at = &root;
  for (size_t begin = 0; !path.empty() && begin <= path.size();) {
    const size_t end = std::min(path.find('.', begin), path.size());
    const std::string name = path.substr(begin, end - begin);
    const auto& children = at->children();
    const auto found = std::find_if(children.begin(), children.end(),
                                    [&](const auto& child) { return child.first == name; });
    TANDEM_CHECK(found != children.end(), "[ZeRO] no module '", path,
                 "' in the model: units name modules by their state_dict paths, such as "
                 "'layer1.0'");
    at = found->second.get();
    begin = end + 1;
  }
  return at;
}

std::string joined(const UnitPaths& paths) {
  std::string text;
  for (const std::string& path : paths) text += (text.empty() ? "" : ", ") + path;
  return text;
}

}  // namespace

// Note [Units by children]
std::vector<UnitPaths> units_by_children(const nn::Module& root) {
  std::vector<PathAndModule> children;
  collect_children(root, "", children);
  std::vector<UnitPaths> units;
  UnitPaths run;  // leaf layers since the last block
  bool run_has_parameters = false;
  const auto close_run = [&] {
    if (run_has_parameters) units.push_back(run);
    run.clear();
    run_has_parameters = false;
  };
  for (const auto& [path, child] : children) {
    if (child->children().empty()) {
      run.push_back(path);
      run_has_parameters = run_has_parameters || has_parameters(*child);
      continue;
    }
    close_run();
    if (has_parameters(*child)) units.push_back({path});
  }
  close_run();
  // A module without children holding parameters: one unit, the module itself.
  if (units.empty() && has_parameters(root)) units.push_back({""});
  return units;
}

UnitPlan plan_units(nn::Module& root, const std::vector<UnitPaths>& given,
                    const std::vector<std::string>& trained_names) {
  const std::vector<UnitPaths> units = given.empty() ? units_by_children(root) : given;
  UnitPlan plan;
  std::vector<size_t> unit_of(trained_names.size(), kNoUnit);
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<nn::Module*>& modules = plan.modules.emplace_back();
    std::vector<size_t>& parameters = plan.parameters.emplace_back();
    for (const std::string& path : units[u]) {
      modules.push_back(module_at(root, path));
      const std::string prefix = path.empty() ? "" : path + ".";
      for (size_t i = 0; i < trained_names.size(); ++i) {
        if (!trained_names[i].starts_with(prefix) || unit_of[i] == u) continue;
        TANDEM_CHECK(unit_of[i] == kNoUnit, "[ZeRO] parameter ", trained_names[i],
                     " is in two units (", joined(units[unit_of[i]]), "; ", joined(units[u]), ")");
        unit_of[i] = u;
        parameters.push_back(i);
      }
    }
    TANDEM_CHECK(!parameters.empty(), "[ZeRO] unit ", u, " (", joined(units[u]),
                 ") holds no trained parameter");
    std::sort(parameters.begin(), parameters.end());  // registration order
  }
  for (size_t i = 0; i < trained_names.size(); ++i) {
    TANDEM_CHECK(unit_of[i] != kNoUnit, "[ZeRO] parameter ", trained_names[i],
                 " is in no unit: name the units (DdpOptions::units) so that each trained "
                 "parameter is in one");
  }
  return plan;
}

}  // namespace tandem::parallel

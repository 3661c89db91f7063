#pragma once
/// UnitPlan: which modules make up each unit of ZeRO stage 3 (Sharding::Parameters), the group
/// of parameters gathered together before the unit's forward and backward and freed after
/// (Note [Stage 3 units] in sharded_units.h), and which of DDP's trained parameters each holds.
///
/// Note [Units by children]: a unit is named by module paths under the wrapped module, as the
/// state_dict names them ("conv1", "layer1.0"), in forward order: DdpOptions::units, or, when
/// none are given, units_by_children(). That rule walks the module's children in registration
/// order, a Sequential counting as its elements: a child with children of its own (a residual
/// block) is a unit alone, and each run of leaf layers between such children is one unit, so a
/// ResNet's units are the stem (conv1, bn1), each BasicBlock and the head (avgpool, fc): the
/// units of PyTorch's FSDP wrapped per block, with the stem and the head on their own instead of
/// left to the root. PyTorch chooses units by module class (ModuleWrapPolicy); a rule by place
/// needs no list of classes and gives these units for every ResNet here, and a model it does not
/// suit names its units. A unit's modules must run through Module::operator() (their forward
/// pre-hooks gather the unit), at least its first one in forward order: BatchNorm2d's
/// forward_relu after conv1 in the stem is one that does not, and need not.

#include <string>
#include <vector>

#include "nn/module.h"

namespace tandem::parallel {

/// A unit's modules, by path under the wrapped module ("" for the module itself).
using UnitPaths = std::vector<std::string>;

/// Note [Units by children]. Units without parameters are left out.
std::vector<UnitPaths> units_by_children(const nn::Module& root);

struct UnitPlan {
  std::vector<std::vector<nn::Module*>> modules;  ///< per unit, in forward order
  std::vector<std::vector<size_t>> parameters;    ///< per unit: indices into the trained names
};

/// Resolves `units` (units_by_children(root) when empty) under `root` and gives each unit the
/// trained parameters below its modules (`trained_names`, as named_parameters() names them).
/// Throws a one-line "[ZeRO] ..." for a path that names no module, a trained parameter in two
/// units or in none, and a unit without trained parameters.
UnitPlan plan_units(nn::Module& root, const std::vector<UnitPaths>& units,
                    const std::vector<std::string>& trained_names);

}  // namespace tandem::parallel

#include "nn/checkpoint.h"

#include <filesystem>
#include <random>

namespace tandem::nn {
namespace {

constexpr const char* kIdKey = "tandem.checkpoint_id";
constexpr const char* kMomentumPrefix = "momentum.";

std::string new_checkpoint_id() {
  std::random_device device;
  return std::to_string(device()) + "-" + std::to_string(device());
}

// The optimizer must update exactly the model's parameters, in order, for names to line up.
void check_optimizer_matches(const Module& model, const Sgd& optimizer,
                             const NamedTensors& parameters) {
  const std::vector<Tensor>& optimized = optimizer.parameters();
  bool same = optimized.size() == parameters.size();
  for (size_t i = 0; same && i < optimized.size(); ++i)
    same = optimized[i].is_same(parameters[i].second);
  TANDEM_CHECK(same, "[checkpoint] the optimizer must be built over ", model.describe(),
               ".parameters() (same tensors, same order)");
}

int64_t parse_int(const Metadata& metadata, const std::string& key, const std::string& path) {
  const auto found = metadata.find(key);
  TANDEM_CHECK(found != metadata.end(), "[checkpoint] ", path, " lacks '", key, "'");
  try {
    return std::stoll(found->second);
  } catch (const std::exception&) {
    TANDEM_FAIL("[checkpoint] ", path, ": '", key, "' is not an integer: '", found->second, "'");
  }
}

}  // namespace

std::string sidecar_path(const std::string& path) {
  return path + ".state";
}

std::string previous_path(const std::string& path) {
  return path + ".prev";
}

namespace {

// Makes `to` another name of `from`'s file, replacing `to` atomically (link to a temporary name,
// then rename); nothing when `from` does not exist.
void keep_as(const std::string& from, const std::string& to) {
  std::error_code error;
  if (!std::filesystem::exists(from, error)) return;
  const std::string temporary = to + ".linking";
  std::filesystem::remove(temporary, error);
  std::filesystem::create_hard_link(from, temporary, error);
  if (error) {  // a file system without hard links: a copy does the same, more slowly
    std::filesystem::copy_file(from, temporary, std::filesystem::copy_options::overwrite_existing,
                               error);
  }
  TANDEM_CHECK(!error, "[checkpoint] could not keep ", from, " as ", to, ": ", error.message());
  std::filesystem::rename(temporary, to, error);
  TANDEM_CHECK(!error, "[checkpoint] could not keep ", from, " as ", to, ": ", error.message());
}

// The id both files of a pair carry, or why they have none in common: a file missing or
// unreadable, an id missing, or two files of different saves.
struct PairCheck {
  std::string id;       ///< "" when the pair cannot load
  std::string problem;  ///< why, when it cannot
};

PairCheck check_pair(const std::string& path) {
  std::string ids[2];
  const std::string files[2] = {path, sidecar_path(path)};
  for (int i = 0; i < 2; ++i) {
    if (!std::filesystem::exists(files[i])) return {"", files[i] + " is missing"};
    try {
      const Metadata metadata = load_safetensors(files[i]).metadata;
      const auto id = metadata.find(kIdKey);
      if (id == metadata.end()) return {"", files[i] + " has no checkpoint id"};
      ids[i] = id->second;
    } catch (const Error& e) {
      return {"", e.message()};
    }
  }
  if (ids[0] != ids[1]) return {"", path + " and " + files[1] + " come from different saves"};
  return {ids[0], ""};
}

std::string pair_id(const std::string& path) {
  return check_pair(path).id;
}

}  // namespace

void save_checkpoint(const std::string& path, const Module& model, const Sgd& optimizer,
                     const TrainingState& state) {
  const NamedTensors parameters = model.named_parameters();
  check_optimizer_matches(model, optimizer, parameters);
  const std::string id = new_checkpoint_id();

  NamedTensors momentum;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& buffer = optimizer.momentum_buffers()[i];
    if (buffer.defined()) momentum.emplace_back(kMomentumPrefix + parameters[i].first, buffer);
  }
  Metadata sidecar = state.extra;
  sidecar[kIdKey] = id;
  sidecar["epoch"] = std::to_string(state.epoch);
  sidecar["step"] = std::to_string(state.step);
  sidecar["rng_state"] = state.rng_state;
  sidecar["lr"] = std::to_string(optimizer.lr());
  // Note [Checkpoint atomicity]: the complete pair there now becomes the previous one (the
  // sidecar first, so a crash in between never pairs a new previous sidecar with old weights
  // that match: their ids differ), then the new sidecar, then the new weights.
  const bool kept_previous = !pair_id(path).empty();
  if (kept_previous) {
    keep_as(sidecar_path(path), sidecar_path(previous_path(path)));
    keep_as(path, previous_path(path));
  }
  save_safetensors(sidecar_path(path), momentum, sidecar);
  try {
    save_safetensors(path, model.state_dict(), {{"format", "pt"}, {kIdKey, id}});
  } catch (const Error&) {
    // The weights could not be written (a full disk): no new sidecar may stay without them. The
    // pair before the save is whole again, or, at a first save, nothing is left.
    if (kept_previous) {
      keep_as(sidecar_path(previous_path(path)), sidecar_path(path));
    } else {
      std::error_code ignored;
      std::filesystem::remove(sidecar_path(path), ignored);
    }
    throw;
  }
}

namespace {

TrainingState load_pair(const std::string& path, Module& model, Sgd& optimizer);

}  // namespace

bool has_checkpoint(const std::string& path) {
  return !pair_id(path).empty() || !pair_id(previous_path(path)).empty();
}

std::string checkpoint_problem(const std::string& path) {
  return check_pair(path).problem;
}

Metadata loadable_metadata(const std::string& path) {
  for (const std::string& pair : {path, previous_path(path)}) {
    if (!pair_id(pair).empty()) return load_safetensors(sidecar_path(pair)).metadata;
  }
  return {};
}

TrainingState load_checkpoint(const std::string& path, Module& model, Sgd& optimizer) {
  try {
    return load_pair(path, model, optimizer);
  } catch (const Error& e) {
    // Note [Checkpoint atomicity]: an interrupted save leaves the previous pair complete. A
    // model that does not fit the checkpoint fails the same way on both: the first error stands.
    const std::string previous = previous_path(path);
    if (pair_id(previous).empty()) throw;
    TrainingState state;
    try {
      state = load_pair(previous, model, optimizer);
    } catch (const Error&) {
      throw e;
    }
    state.fell_back_because = e.message();
    return state;
  }
}

namespace {

TrainingState load_pair(const std::string& path, Module& model, Sgd& optimizer) {
  const NamedTensors parameters = model.named_parameters();
  check_optimizer_matches(model, optimizer, parameters);
  const SafetensorsFile weights = load_safetensors(path);
  const SafetensorsFile sidecar = load_safetensors(sidecar_path(path));
  const auto weights_id = weights.metadata.find(kIdKey);
  const auto sidecar_id = sidecar.metadata.find(kIdKey);
  TANDEM_CHECK(weights_id != weights.metadata.end() && sidecar_id != sidecar.metadata.end() &&
                   weights_id->second == sidecar_id->second,
               "[checkpoint] ", path, " and ", sidecar_path(path),
               " come from different saves (interrupted save?); use another checkpoint");

  // Check the momentum buffers before touching anything.
  std::vector<Tensor> momentum(parameters.size());
  for (const auto& [name, tensor] : sidecar.tensors) {
    TANDEM_CHECK(name.rfind(kMomentumPrefix, 0) == 0, "[checkpoint] unexpected tensor '", name,
                 "' in ", sidecar_path(path));
    const std::string parameter = name.substr(std::string(kMomentumPrefix).size());
    size_t i = 0;
    while (i < parameters.size() && parameters[i].first != parameter) ++i;
    TANDEM_CHECK(i < parameters.size(), "[checkpoint] momentum for unknown parameter '", parameter,
                 "'");
    TANDEM_CHECK(tensor.shape() == parameters[i].second.shape(), "[checkpoint] momentum of '",
                 parameter, "' has shape ", shape_str(tensor.shape()), ", parameter has ",
                 shape_str(parameters[i].second.shape()));
    // In the parameter's memory format, as the SGD kernels walk both in step.
    const Tensor& parameter_now = parameters[i].second;
    momentum[i] = tensor.to(parameter_now.device()).contiguous(parameter_now.memory_format());
  }
  TrainingState state;
  state.epoch = parse_int(sidecar.metadata, "epoch", sidecar_path(path));
  state.step = parse_int(sidecar.metadata, "step", sidecar_path(path));
  state.rng_state = sidecar.metadata.count("rng_state") ? sidecar.metadata.at("rng_state") : "";
  for (const auto& [key, value] : sidecar.metadata) {
    if (key != kIdKey && key != "epoch" && key != "step" && key != "rng_state" && key != "lr") {
      state.extra[key] = value;
    }
  }

  load_state_dict(model, weights.tensors);  // validates fully before copying
  optimizer.mutable_momentum_buffers() = momentum;
  return state;
}

}  // namespace

}  // namespace tandem::nn

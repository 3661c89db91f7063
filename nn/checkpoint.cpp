#include "nn/checkpoint.h"

#include <charconv>
#include <climits>
#include <filesystem>
#include <random>

namespace tandem::nn {
namespace {

constexpr const char* kIdKey = "tandem.checkpoint_id";
constexpr const char* kMomentumPrefix = "momentum.";
constexpr const char* kScalerPrefix = "grad_scaler.";

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

// A whole decimal integer in [min, max]: "12abc" is not 12, nor "4294967297" an int's 1 (S10).
int64_t parse_int(const Metadata& metadata, const std::string& key, const std::string& path,
                  int64_t min, int64_t max) {
  const auto found = metadata.find(key);
  TANDEM_CHECK(found != metadata.end(), "[checkpoint] ", path, " lacks '", key, "'");
  const std::string& text = found->second;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  TANDEM_CHECK(!text.empty() && error == std::errc{} && end == text.data() + text.size() &&
                   value >= min && value <= max,
               "[checkpoint] ", path, ": '", key, "' is not an integer from ", min, " to ", max,
               ": '", text.substr(0, 40), "'");
  return value;
}

// A whole decimal number that round-trips `T` exactly: "1e40" is no float, "0.5x" not 0.5 (S10).
template <typename T>
T parse_number(const Metadata& metadata, const std::string& key, const std::string& path) {
  const auto found = metadata.find(key);
  TANDEM_CHECK(found != metadata.end(), "[checkpoint] ", path, " lacks '", key, "'");
  const std::string& text = found->second;
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  TANDEM_CHECK(!text.empty() && error == std::errc{} && end == text.data() + text.size(),
               "[checkpoint] ", path, ": '", key, "' is not a number: '", text.substr(0, 40), "'");
  return value;
}

// std::to_chars writes the shortest text that reads back as the same value, bit for bit.
template <typename T>
std::string exact_text(T value) {
  char text[64];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  TANDEM_CHECK(error == std::errc{}, "[checkpoint] could not write ", value);
  return std::string(text, end);
}

// Note [Scaler in the sidecar]: a gradient scaler's state is five metadata keys, the fields of
// PyTorch's GradScaler.state_dict(); numbers are written as the shortest text that reads back
// bit for bit, so a resumed run scales exactly as the run that saved. A sidecar without them (a
// run without a scaler, or saved before scalers existed) loads with none.
void put_scaler_state(const GradScalerState& scaler, Metadata& sidecar) {
  const std::string p = kScalerPrefix;
  sidecar[p + "scale"] = exact_text(scaler.scale);
  sidecar[p + "growth_tracker"] = std::to_string(scaler.growth_tracker);
  sidecar[p + "growth_factor"] = exact_text(scaler.growth_factor);
  sidecar[p + "backoff_factor"] = exact_text(scaler.backoff_factor);
  sidecar[p + "growth_interval"] = std::to_string(scaler.growth_interval);
}

// Checked as a GradScaler checks a state it loads, before the caller's load changes anything.
std::optional<GradScalerState> scaler_state(const Metadata& sidecar, const std::string& path) {
  const std::string p = kScalerPrefix;
  if (sidecar.count(p + "scale") == 0) return std::nullopt;
  const GradScalerState state{
      .scale = parse_number<float>(sidecar, p + "scale", path),
      .growth_tracker = parse_int(sidecar, p + "growth_tracker", path, 0, INT64_MAX),
      .growth_factor = parse_number<double>(sidecar, p + "growth_factor", path),
      .backoff_factor = parse_number<double>(sidecar, p + "backoff_factor", path),
      .growth_interval = parse_int(sidecar, p + "growth_interval", path, 1, INT64_MAX)};
  try {
    check_grad_scaler_state(state);
  } catch (const Error& e) {
    TANDEM_FAIL("[checkpoint] ", path, ": ", e.message());
  }
  return state;
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
  std::filesystem::remove(temporary, error);  // a symlink planted there: the link, not its target
  std::filesystem::create_hard_link(from, temporary, error);  // never follows a name that exists
  if (error) {  // a file system without hard links: a copy does the same, more slowly
    // Without overwrite_existing the copy creates with O_EXCL, which also refuses a symlink
    // planted since the remove() (review S8).
    error.clear();
    std::filesystem::copy_file(from, temporary, std::filesystem::copy_options::none, error);
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
  if (state.grad_scaler) put_scaler_state(*state.grad_scaler, sidecar);
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

  // Check everything before touching anything: the weights first, so that a checkpoint of
  // another model is named by its weights, not by the momentum that merely follows them.
  check_state_dict(model, weights.tensors);
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
    const Tensor& parameter_now = parameters[i].second;
    // The SGD kernels read the buffer as the parameter's dtype: another one would load, replace
    // the weights, and fail at the first step naming neither checkpoint nor tensor (S10).
    TANDEM_CHECK(tensor.dtype() == parameter_now.dtype(), "[checkpoint] momentum of '", parameter,
                 "' in ", sidecar_path(path), " is ", dtype_name(tensor.dtype()), ", parameter is ",
                 dtype_name(parameter_now.dtype()));
    // In the parameter's memory format, as the SGD kernels walk both in step.
    momentum[i] = tensor.to(parameter_now.device()).contiguous(parameter_now.memory_format());
  }
  TrainingState state;
  // Epochs are counted in an int by the data loaders; steps in 64 bits.
  state.epoch = parse_int(sidecar.metadata, "epoch", sidecar_path(path), 0, INT_MAX);
  state.step = parse_int(sidecar.metadata, "step", sidecar_path(path), 0, INT64_MAX);
  state.rng_state = sidecar.metadata.count("rng_state") ? sidecar.metadata.at("rng_state") : "";
  state.grad_scaler = scaler_state(sidecar.metadata, sidecar_path(path));
  for (const auto& [key, value] : sidecar.metadata) {
    if (key != kIdKey && key != "epoch" && key != "step" && key != "rng_state" && key != "lr" &&
        key.rfind(kScalerPrefix, 0) != 0) {
      state.extra[key] = value;
    }
  }

  load_state_dict(model, weights.tensors);  // validates fully before copying
  optimizer.mutable_momentum_buffers() = momentum;
  return state;
}

}  // namespace

}  // namespace tandem::nn

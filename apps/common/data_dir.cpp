#include "apps/common/data_dir.h"

#include <filesystem>
#include <optional>

#include "engine/error.h"

namespace tandem::apps {
namespace {

// A variable that is set and not empty.
std::optional<std::string> non_empty(const parallel::EnvLookup& environment,
                                     const std::string& name) {
  std::optional<std::string> value = environment(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

// The folder that holds cifar-10-batches-bin by default (Note [Default data folder]), if the
// environment says where it is.
std::optional<std::string> data_home(const parallel::EnvLookup& environment) {
  if (auto dir = non_empty(environment, "TANDEM_DATA_DIR")) return *dir;
  const std::optional<std::string> xdg = non_empty(environment, "XDG_DATA_HOME");
  if (xdg && std::filesystem::path(*xdg).is_absolute()) return *xdg + "/tandem";
  if (auto home = non_empty(environment, "HOME")) return *home + "/.local/share/tandem";
  return std::nullopt;
}

}  // namespace

std::vector<std::string> default_data_places(const parallel::EnvLookup& environment) {
  std::vector<std::string> places;
  if (auto home = data_home(environment)) places.push_back(*home + "/cifar-10-batches-bin");
  places.emplace_back(kOldDataDir);
  return places;
}

DataDirChoice choose_data_dir(const std::string& program, const std::string& given,
                              const std::string& other_choices,
                              const parallel::EnvLookup& environment) {
  if (!given.empty()) {
    TANDEM_CHECK(std::filesystem::is_directory(given), "[", program, "] no CIFAR-10 at ", given,
                 ": run scripts/get_cifar10.sh, or ", other_choices);
    return {.dir = given, .notice = ""};
  }
  const std::vector<std::string> places = default_data_places(environment);
  for (const std::string& place : places) {
    if (!std::filesystem::is_directory(place)) continue;
    if (place != kOldDataDir || places.size() == 1) return {.dir = place, .notice = ""};
    return {.dir = place,
            .notice = program + ": reading CIFAR-10 from its old place " + place + "; move it to " +
                      places.front() + " (found from any folder)"};
  }
  // The usual mistake (read_cifar10 names it for --data-dir): TANDEM_DATA_DIR naming the
  // cifar-10-batches-bin folder itself rather than the folder that holds it.
  if (auto mine = non_empty(environment, "TANDEM_DATA_DIR")) {
    TANDEM_CHECK(!std::filesystem::exists(*mine + "/test_batch.bin"), "[", program,
                 "] no CIFAR-10 at ", places.front(), ", but TANDEM_DATA_DIR=", *mine,
                 " holds its files: did you mean TANDEM_DATA_DIR=",
                 std::filesystem::path(*mine).parent_path().string(),
                 "? (it names the folder that holds cifar-10-batches-bin)");
  }
  std::string looked = places.front();
  if (places.size() > 1) looked += " (nor at the old " + places.back() + ")";
  TANDEM_FAIL("[", program, "] no CIFAR-10 at ", looked, ": run scripts/get_cifar10.sh, or ",
              other_choices);
}

}  // namespace tandem::apps

#pragma once
/// Where train_cifar and bench_cifar look for CIFAR-10 when --data-dir is not given.
///
/// Note [Default data folder]: the data set is downloaded once per user and found from any
/// folder, as torchvision's and Keras's are (~/.keras/datasets, $TORCH_HOME): the default is
/// $TANDEM_DATA_DIR/cifar-10-batches-bin when TANDEM_DATA_DIR is set, else
/// ${XDG_DATA_HOME:-$HOME/.local/share}/tandem/cifar-10-batches-bin (the XDG base-directory
/// place for a user's data; a relative XDG_DATA_HOME is ignored, as the spec says). There is no
/// folder relative to the working directory among them: one would be found from one folder
/// only, and a second download would follow from the next. The old default,
/// ./data/cifar-10-batches-bin (inside the data library's source folder), is still found last,
/// with a one-line notice naming the new place. scripts/get_cifar10.sh writes to the same place
/// by default (its --default-dir prints it); the two spell the same order, in two languages.

#include <string>
#include <vector>

#include "parallel/comm/rendezvous/launch_env.h"

namespace tandem::apps {

/// The old default, found last.
inline constexpr const char* kOldDataDir = "./data/cifar-10-batches-bin";

/// The places to look, in order: the user's data folder (when TANDEM_DATA_DIR, XDG_DATA_HOME or
/// HOME says where it is), then kOldDataDir.
std::vector<std::string> default_data_places(const parallel::EnvLookup& environment);

struct DataDirChoice {
  std::string dir;     ///< the folder to read
  std::string notice;  ///< a line to print (found at the old place), or empty
};

/// `given` (--data-dir) when it is not empty; else the first default place that is a folder.
/// Throws "[program] no CIFAR-10 at ..." naming every place looked at, with the command that
/// fetches it and `other_choices` (e.g. "pass --data-dir DIR or --synthetic").
DataDirChoice choose_data_dir(const std::string& program, const std::string& given,
                              const std::string& other_choices,
                              const parallel::EnvLookup& environment);

}  // namespace tandem::apps

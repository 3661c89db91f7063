#pragma once
/// The DDP gradient buckets a checkpoint carries, so a resumed job reduces its gradients exactly as
/// the job it continues (Note [Bucket order on resume] in parallel/reducer_buckets.cpp): the
/// Reducer's bucket_order() as the sidecar's "ddp_bucket_order" metadata, parameter indices
/// separated by commas. Absent when the checkpoint was not written by ddp, or before the first
/// step.

#include <string>

#include "apps/common/training_setup.h"
#include "nn/safetensors.h"

namespace tandem::apps {

/// Adds the ddp Reducer's bucket order to a checkpoint's metadata (nothing outside ddp).
void record_bucket_order(const TrainingSetup& setup, nn::Metadata& extra);

/// Builds the ddp Reducer's buckets in the order the checkpoint `path` recorded in `saved`, on
/// every rank alike before the first step (nothing outside ddp or without one). A malformed
/// record is one line naming the checkpoint.
void restore_bucket_order(const nn::Metadata& saved, const TrainingSetup& setup,
                          const std::string& path);

}  // namespace tandem::apps

#pragma once
/// Every spelling of a memory format (memory_format.h) that parse_memory_format and the apps'
/// --memory-format accept, each format's name first (PyTorch's spelling): the one list of them.
/// Kept out of memory_format.h, which every tensor includes, so that a new spelling rebuilds
/// only its readers.

#include <utility>

#include "engine/memory_format.h"

namespace tandem {

inline constexpr std::pair<const char*, MemoryFormat> kMemoryFormatSpellings[] = {
    {"channels_last", MemoryFormat::ChannelsLast},
    {"channels-last", MemoryFormat::ChannelsLast},
    {"nhwc", MemoryFormat::ChannelsLast},
    {"contiguous", MemoryFormat::Contiguous},
    {"nchw", MemoryFormat::Contiguous},
};

}  // namespace tandem

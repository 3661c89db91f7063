#include "engine/text_table.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace tandem {
namespace {

void append_row(std::string& text, const std::vector<std::string>& cells,
                const std::vector<size_t>& widths) {
  text += '|';
  for (size_t c = 0; c < cells.size(); ++c) {
    text += ' ';
    text += cells[c];
    text.append(widths[c] - std::min(widths[c], display_width(cells[c])), ' ');
    text += " |";
  }
  text += '\n';
}

}  // namespace

std::string format_text(const char* pattern, ...) {
  va_list args;
  va_start(args, pattern);
  va_list again;
  va_copy(again, args);
  const int length = std::vsnprintf(nullptr, 0, pattern, args);
  va_end(args);
  std::string text(static_cast<size_t>(std::max(length, 0)), '\0');
  std::vsnprintf(text.data(), text.size() + 1, pattern, again);
  va_end(again);
  return text;
}

size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

TextTable::TextTable(std::vector<std::string> header) : header_(std::move(header)) {}

void TextTable::add(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::add_note(std::string first, std::string note) {
  rows_.push_back({std::move(first), std::move(note)});
}

std::string TextTable::markdown() const {
  std::vector<size_t> widths(header_.size(), 3);
  for (size_t c = 0; c < header_.size(); ++c) {
    widths[c] = std::max(widths[c], display_width(header_[c]));
    for (const auto& row : rows_) {
      if (row.size() == header_.size() || c == 0)
        widths[c] = std::max(widths[c], display_width(row[c]));
    }
  }
  std::string text;
  append_row(text, header_, widths);
  std::vector<std::string> rule;
  rule.reserve(widths.size());
  for (size_t width : widths) rule.emplace_back(width, '-');
  append_row(text, rule, widths);
  for (const auto& row : rows_) append_row(text, row, widths);
  return text;
}

}  // namespace tandem

#pragma once
/// Text for people: printf into a std::string, and rows of cells as a Markdown table with aligned
/// columns (the profiler's per-op table, bench_cifar's report), readable in a terminal and
/// rendered as a table where Markdown is.

#include <string>
#include <vector>

namespace tandem {

/// printf's `pattern` and arguments as a string (of any length).
std::string format_text(const char* pattern, ...) __attribute__((format(printf, 1, 2)));

/// The columns `text` takes in a terminal: UTF-8 continuation bytes take none (the en dash of a
/// spread is three bytes and one column).
size_t display_width(const std::string& text);

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header);
  /// A row; missing cells are empty, extra ones are dropped.
  void add(std::vector<std::string> cells);
  /// A row of `first` and then one long cell (an error), left out of the column widths so that
  /// it does not widen every other row; Markdown fills the missing cells.
  void add_note(std::string first, std::string note);
  /// The table, a line per row (header, rule, rows), each column as wide as its widest cell.
  std::string markdown() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace tandem

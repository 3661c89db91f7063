#include "engine/text_table.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(TextTable, ColumnsAreAsWideAsTheirWidestCellInTerminalColumns) {
  TextTable table({"op", "ms"});
  table.add({"conv2d", "1.5"});
  table.add({"add", "12–14"});  // the en dash is three bytes, one column
  EXPECT_EQ(table.markdown(),
            "| op     | ms    |\n"
            "| ------ | ----- |\n"
            "| conv2d | 1.5   |\n"
            "| add    | 12–14 |\n");
}

TEST(TextTable, ANoteRowDoesNotWidenTheColumnsAndShortRowsAreFilled) {
  TextTable table({"config", "images/s", "ms"});
  table.add({"single"});
  table.add_note("ddp x2", "error: rank 1 exited with status 3 before its first step");
  EXPECT_EQ(table.markdown(),
            "| config | images/s | ms  |\n"
            "| ------ | -------- | --- |\n"
            "| single |          |     |\n"
            "| ddp x2 | error: rank 1 exited with status 3 before its first step |\n");
}

TEST(FormatText, PrintsAnyLength) {
  EXPECT_EQ(format_text("%.1f %%", 12.34), "12.3 %");
  const std::string long_text(1000, 'x');
  EXPECT_EQ(format_text("[%s]", long_text.c_str()), "[" + long_text + "]");
  EXPECT_EQ(display_width("µs"), 2u);
}

}  // namespace
}  // namespace tandem

// Note [Round values]: what restart rounds read back from the store is parsed whole and checked.

#include "parallel/launch/round_values.h"

#include <gtest/gtest.h>

#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using tandem::testing::contains;
using tandem::testing::error_message;

const RoundValueSource kSource{.key = "tandem-run/round/0/members",
                               .store = "the rendezvous store at 127.0.0.1:29500"};

TEST(RoundValues, AWholeNumberInRangeParsesAndAnythingElseIsOneLineNamingKeyAndStore) {
  EXPECT_EQ(parse_round_int("12", 0, 100, kSource), 12);
  for (const char* bad : {"", "12abc", " 12", "+12", "-1", "101", "1e3", "99999999999999999999"}) {
    const std::string message = error_message([&] { parse_round_int(bad, 0, 100, kSource); });
    EXPECT_TRUE(contains(message, "[tandem-run] the rendezvous store at 127.0.0.1:29500 holds \"" +
                                      std::string(bad) +
                                      "\" under tandem-run/round/0/members, which should be a "
                                      "whole number from 0 to 100"))
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(RoundValues, MembersAreCheckedForCountRangeOrderAndRepeats) {
  const RoundMembers members = parse_members("3;0,2,4", 5, kSource);
  EXPECT_EQ(members.tickets, 3);
  EXPECT_EQ(members.ids, (std::vector<int>{0, 2, 4}));
  // A launcher started again by hand holds two tickets under one id.
  EXPECT_EQ(parse_members("2;1", 2, kSource).ids, (std::vector<int>{1}));
  for (const char* bad : {"x;y", "2", "2;", ";0", "2;0,", "2;0,,1", "3;0,1,2", "0;0", "2;0,5",
                          "2;1,0", "2;1,1", "1;0,1", "2;-1", "2;0 ,1", "2;0,1;"}) {
    const std::string message = error_message([&] { parse_members(bad, 2, kSource); });
    EXPECT_TRUE(contains(message, "holds \"" + std::string(bad) +
                                      "\" under tandem-run/round/0/members, which should be "
                                      "\"<tickets>;<node id>,<node id>,…\" with 1 to 2 tickets"))
        << bad << ": " << message;
  }
}

TEST(RoundValues, QuotedValuesAreShortAndPrintable) {
  EXPECT_EQ(quote_value("a\nb\x1b[2J"), "\"a?b?[2J\"");
  EXPECT_EQ(quote_value(std::string(100, 'x')), "\"" + std::string(80, 'x') + "…\"");
}

}  // namespace
}  // namespace tandem::parallel

#include "common/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

Status FailIf(bool fail) { return fail ? Status::NotFound("thing missing") : Status::Ok(); }

// Counts how far a function got, to show that the macros return early.
Status TwoSteps(bool fail_first, int* reached) {
  GF_RETURN_IF_ERROR(FailIf(fail_first));
  *reached = 2;
  return Status::Ok();
}

Result<int> Half(int v) {
  if (v % 2 != 0) return Status::InvalidArgument(std::to_string(v) + " is odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  GF_ASSIGN_OR_RETURN(int half, Half(v));
  GF_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Result<std::unique_ptr<int>> Boxed(int v) { return std::make_unique<int>(v); }

Result<int> Unbox(int v) {
  GF_ASSIGN_OR_RETURN(std::unique_ptr<int> p, Boxed(v));
  return *p + 1;
}

TEST(StatusTest, DefaultStatusIsOkAndPrintsOk) {
  // Given a default-built Status and Status::Ok(), expect both ok with code kOk, an empty
  // message and "ok" as text.
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "ok");
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().ToString(), "ok");
}

TEST(StatusTest, EachFactoryCarriesItsCodeAndMessage) {
  // Given every error factory, expect its code, its message unchanged and not ok.
  struct Case {
    Status s;
    StatusCode code;
    const char* text;
  };
  const Case cases[] = {
      {Status::InvalidArgument("m1"), StatusCode::kInvalidArgument, "invalid argument: m1"},
      {Status::NotFound("m2"), StatusCode::kNotFound, "not found: m2"},
      {Status::AlreadyExists("m3"), StatusCode::kAlreadyExists, "already exists: m3"},
      {Status::FailedPrecondition("m4"), StatusCode::kFailedPrecondition, "failed precondition: m4"},
      {Status::Unavailable("m5"), StatusCode::kUnavailable, "unavailable: m5"},
      {Status::Internal("m6"), StatusCode::kInternal, "internal error: m6"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.s.ok()) << c.text;
    EXPECT_EQ(c.s.code(), c.code) << c.text;
    EXPECT_EQ(c.s.ToString(), c.text);
  }
  EXPECT_EQ(Status::NotFound("m2").message(), "m2");
}

TEST(StatusTest, StatusCodeNamesAreLowercaseWords) {
  // Given each code, expect the name ToString uses.
  EXPECT_STREQ(StatusCodeName(StatusCode::kOk), "ok");
  EXPECT_STREQ(StatusCodeName(StatusCode::kInvalidArgument), "invalid argument");
  EXPECT_STREQ(StatusCodeName(StatusCode::kNotFound), "not found");
  EXPECT_STREQ(StatusCodeName(StatusCode::kAlreadyExists), "already exists");
  EXPECT_STREQ(StatusCodeName(StatusCode::kFailedPrecondition), "failed precondition");
  EXPECT_STREQ(StatusCodeName(StatusCode::kUnavailable), "unavailable");
  EXPECT_STREQ(StatusCodeName(StatusCode::kInternal), "internal error");
}

TEST(StatusTest, WithContextPrefixesTheMessageAndKeepsTheCode) {
  // Given an error, expect WithContext to prefix "context: " (twice when applied twice) and
  // leave the original untouched.
  Status base = Status::InvalidArgument("duration must be a number");
  Status once = base.WithContext("trace.csv:12");
  EXPECT_EQ(once.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(once.message(), "trace.csv:12: duration must be a number");
  EXPECT_EQ(once.ToString(), "invalid argument: trace.csv:12: duration must be a number");
  EXPECT_EQ(once.WithContext("sim").message(), "sim: trace.csv:12: duration must be a number");
  EXPECT_EQ(base.message(), "duration must be a number");
}

TEST(StatusTest, WithContextOnOkStaysOkWithoutMessage) {
  // Given an OK status, expect WithContext to return OK with no message (no "ctx: " noise).
  Status s = Status::Ok().WithContext("file.yaml");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, ResultHoldsAValue) {
  // Given a Result built from a value, expect ok, the value through every accessor, and an OK
  // status.
  Result<std::string> r = std::string("gpu");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), "gpu");
  EXPECT_EQ(*r, "gpu");
  EXPECT_EQ(r->size(), 3u);
  EXPECT_TRUE(r.status().ok());
  r.value() += "s";
  EXPECT_EQ(*r, "gpus");
  const Result<std::string>& cr = r;
  EXPECT_EQ(cr.value(), "gpus");
  EXPECT_EQ(cr->size(), 4u);
  std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "gpus");
}

TEST(StatusTest, ResultHoldsAnError) {
  // Given a Result built from an error, expect not ok and that error back from status().
  Result<int> r = Status::NotFound("no such node");
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "no such node");
}

TEST(StatusTest, ResultHoldsMoveOnlyValues) {
  // Given a Result of a move-only type, expect the value to be moved out intact.
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 7);
}

TEST(StatusDeathTest, ResultFromOkStatusIsABug) {
  // Given an OK Status used as an error, expect the CHECK to abort with its message.
  EXPECT_DEATH({ Result<int> r(Status::Ok()); (void)r; }, "Result built from an OK status");
}

TEST(StatusDeathTest, ValueOfAnErrorIsABug) {
  // Given a Result holding an error, expect value() to abort and print the error.
  EXPECT_DEATH(
      {
        Result<int> r = Status::InvalidArgument("bad gpus");
        (void)r.value();
      },
      "invalid argument: bad gpus");
}

TEST(StatusTest, ReturnIfErrorReturnsEarlyOnlyOnError) {
  // Given a step that fails, expect GF_RETURN_IF_ERROR to return its status before the next
  // step; given one that succeeds, expect the function to go on.
  int reached = 1;
  Status s = TwoSteps(true, &reached);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "thing missing");
  EXPECT_EQ(reached, 1);
  EXPECT_TRUE(TwoSteps(false, &reached).ok());
  EXPECT_EQ(reached, 2);
}

TEST(StatusTest, AssignOrReturnDeclaresTheValueOrReturnsTheError) {
  // Given chained GF_ASSIGN_OR_RETURN, expect the value when every step succeeds and the first
  // failing step's error otherwise.
  Result<int> ok = Quarter(12);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  Result<int> first = Quarter(7);
  EXPECT_EQ(first.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(first.status().message(), "7 is odd");
  Result<int> second = Quarter(6);  // 6 -> 3 -> odd
  EXPECT_EQ(second.status().message(), "3 is odd");
  Result<int> unboxed = Unbox(41);
  ASSERT_TRUE(unboxed.ok());
  EXPECT_EQ(*unboxed, 42);
}

}  // namespace
}  // namespace gpufleet

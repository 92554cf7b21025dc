#include "cli/plan_command.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace gpufleet::cli {
namespace {

TEST(PlanCommandHelpTest, TheAwsExampleNamesTheCloud) {
  // Given plan's --help, expect its AWS p3.16xlarge example to name --cloud aws: us-east-1 alone
  // is also a Lambda region, so the example would price from whichever place is cheaper.
  CLI::App app;
  (void)SetupPlanCommand(app);
  const std::string footer = app.get_subcommand("plan")->get_footer();
  const size_t example = footer.find("on AWS p3.16xlarge");
  ASSERT_NE(example, std::string::npos) << footer;
  const std::string command = footer.substr(example, footer.find("--slo-p95-wait", example) - example);
  EXPECT_NE(command.find("--cloud aws --region us-east-1"), std::string::npos) << command;
}

}  // namespace
}  // namespace gpufleet::cli

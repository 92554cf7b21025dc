#include "cli/client_commands.h"


#include <algorithm>
#include <cctype>
#include <limits>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/job_yaml.h"
#include "api/token_summary.h"
#include "cli/client.h"
#include "cli/client_common.h"
#include "common/strings.h"
#include "common/time.h"
#include "obs/alerts.h"

// The team and administration commands: cost, budget, quota, alerts, token, audit.

namespace gpufleet::cli {

namespace {

using namespace client;  // NOLINT(build/namespaces): the shared plumbing of the client commands

// --since DURATION as the since_ms query value (now minus it), or why not.
Result<std::string> SinceQuery(const std::string& text, const char* example) {
  auto d = ParseDuration(text);
  if (!d || *d <= Duration::Zero()) {
    return Status::InvalidArgument("--since wants a positive duration like " + std::string(example) + ", got '" + text + "'");
  }
  const int64_t now = NowMs();
  if (d->millis() > now) {
    return Status::InvalidArgument("--since " + text + " reaches back before 1970: at most " +
                                   std::to_string(now / (24 * 3600 * 1000)) + "d");
  }
  return std::to_string(now - d->millis());
}

std::function<int()> SetupCost(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string team;
    std::string since;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("cost", "What jobs and teams have cost, against their budgets");
  sub->add_option("--team", a->team, "Only this team");
  sub->add_option("--since", a->since,
                  "Only jobs submitted in the last DURATION (e.g. 7d, 12h): the jobs listed and JOBS COST; SPENT "
                  "stays the budget period's");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet cost
  gpufleet cost --team vision --since 7d -o json
A job pays its GPUs' share of its nodes' prices while it holds them (agents give their node's price
with --price-per-hour). A node the pool rented is billed whole, from its rent to its release: the
team it was rented for pays what its jobs do not use (RENTED IDLE: booting, idle GPUs, the idle
tail). SPENT counts from the budget period's start and includes RENTED IDLE; RATE is what the
team costs per hour now. A hard budget stops the team early by its jobs' stop grace (and the
pool's release lead) so that the bill ends at the budget; see docs/cost.md.)");
  return [a]() {
    const std::string cmd = "cost";
    std::map<std::string, std::string> query;
    if (!a->team.empty()) query["team"] = a->team;
    if (!a->since.empty()) {
      auto since = SinceQuery(a->since, "7d or 12h");
      if (!since.ok()) return Fail(cmd, kExitUsage, since.status().message());
      query["since_ms"] = *since;
    }
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/cost", query);
    if (!r.ok()) return Report(cmd, r);
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    if (r.body.value("teams", json::array()).empty()) {
      // Nothing to show: say so (and for which team), rather than print a header alone.
      std::printf("%s\n", a->team.empty() ? "no team has costs or a budget yet"
                                           : ("team " + Printable(a->team) + " has no costs or budget (no priced job, no "
                                              "rented node, no budget)").c_str());
      return kExitOk;
    }
    Table t({"TEAM", "JOBS COST", "RENTED IDLE", "SPENT", "RATE", "BUDGET", "SOFT", "MAX/H", "STATUS"});
    for (const auto& team : r.body.value("teams", json::array())) {
      const json b = team.value("budget", json::object());
      std::string status = team.value("over_hard", false)   ? "over hard budget: held"
                           : team.value("hard_stop", false) ? "hard budget reached: stopped"
                           : team.value("over_soft", false) ? "over soft budget"
                                                            : "ok";
      auto limit = [&](const char* k) {
        int64_t v = b.value(k, int64_t{0});
        return v > 0 ? UsdExact(v) : std::string("-");
      };
      t.Add({StrField(team, "team"), Usd(IntField(team, "jobs_cost_micros")),
             Usd(IntField(team, "rented_idle_micros")), Usd(IntField(team, "spent_micros")),
             Usd(IntField(team, "rate_micros_per_hour")) + "/h", limit("hard_micros"), limit("soft_micros"),
             limit("max_rate_micros"), status});
    }
    t.Print();
    // Which period SPENT covers, per team with a budget.
    std::vector<std::string> periods;
    for (const auto& team : r.body.value("teams", json::array())) {
      if (!team.contains("budget") || !team["budget"].is_object()) continue;
      const json& b = team["budget"];
      const std::string period = b.value("period", std::string("none"));
      std::string line = StrField(team, "team") + ": SPENT since " + FormatIso8601(Time::FromMillis(IntField(b, "since_ms")));
      if (period != "none" && b.contains("until_ms")) {
        line += " (" + period + " budget; starts again from $0 at " + FormatIso8601(Time::FromMillis(IntField(b, "until_ms"))) + ")";
      }
      periods.push_back(line);
    }
    if (!periods.empty()) std::printf("\n%s\n", Join(periods, "\n").c_str());
    const int64_t idle = IntField(r.body, "rented_idle_micros");
    std::printf("\ntotal %s over %zu priced job(s)%s\n", Usd(IntField(r.body, "total_micros")).c_str(),
                r.body.value("jobs", json::array()).size(),
                idle > 0 ? (", plus " + Usd(idle) + " of rented nodes no job used (RENTED IDLE): " +
                            Usd(IntField(r.body, "total_micros") + idle) + " in all")
                               .c_str()
                         : "");
    return kExitOk;
  };
}

std::function<int()> SetupBudget(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string team;
    double hard = 0, soft = 0, max_hourly = 0;
    bool keep_running = false;
    bool new_period = false;
    bool clear = false;
    std::string period = "none";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("budget", "Set a team's budget (admin): hard and soft limits, max $/h");
  sub->add_option("team", a->team, "The team")->required();
  sub->add_option("--hard", a->hard, "Dollars: no new starts once spent; running jobs are stopped (requeued)")
      ->check(CLI::Range(0.0, 1e12));
  sub->add_option("--soft", a->soft, "Dollars: reported only")->check(CLI::Range(0.0, 1e12));
  sub->add_option("--max-hourly", a->max_hourly, "Dollars per hour the team's running jobs may cost")
      ->check(CLI::Range(0.0, 1e12));
  sub->add_flag("--keep-running", a->keep_running, "At the hard limit, stop admitting but let running jobs finish");
  sub->add_flag("--new-period", a->new_period,
                "Count spend from now (without it a budget set again keeps counting from its start)");
  sub->add_option("--period", a->period,
                  "none: one period from now; daily, weekly, monthly: the budget rolls over at each UTC "
                  "day, Monday or first of the month, and spend counts from zero again")
      ->check(CLI::IsMember({"none", "daily", "weekly", "monthly"}))
      ->capture_default_str();
  sub->add_flag("--clear", a->clear, "Remove the team's budget (its spend is still counted)");
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet budget vision --hard 5000 --soft 4000 --max-hourly 300
  gpufleet budget vision --hard 20000 --period monthly   # $20k per calendar month (UTC)
  gpufleet budget vision --hard 6000                      # a higher limit; spend so far still counts
  gpufleet budget vision --hard 5000 --new-period         # start counting again from now
  gpufleet budget vision --clear    # removes the budget
  gpufleet cost --team vision       # shows it, and the spend
Without --period a new budget counts from now: spend before it does not count. Set again, it keeps
counting from when it was first set, unless --new-period.)");
  return [a]() {
    const std::string cmd = "budget";
    if (Status st = api::CheckName("team", a->team); !st.ok()) return Fail(cmd, kExitUsage, st.message());
    const bool limits = a->hard > 0 || a->soft > 0 || a->max_hourly > 0;
    if (a->clear && (limits || a->period != "none" || a->keep_running || a->new_period)) {
      return Fail(cmd, kExitUsage, "--clear removes the budget: give it alone, or give the limits without it");
    }
    if (!limits && (a->period != "none" || a->keep_running || a->new_period)) {
      // A period or a stop rule alone would be dropped with the budget.
      return Fail(cmd, kExitUsage,
                  std::string(a->period != "none" ? "--period" : a->keep_running ? "--keep-running" : "--new-period") +
                      " needs a limit to apply to (--hard, --soft or --max-hourly)");
    }
    if (!limits && !a->clear) {
      // (It removed the budget: a look at it should change nothing.)
      return Fail(cmd, kExitUsage,
                  "give a limit (--hard, --soft or --max-hourly), or --clear to remove the budget; 'gpufleet cost "
                  "--team " + a->team + "' shows it");
    }
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    json body = {{"hard", a->hard},
                 {"soft", a->soft},
                 {"max_hourly", a->max_hourly},
                 {"stop_running", !a->keep_running},
                 {"period", a->period}};
    if (a->new_period) body["new_period"] = true;  // from now by the controller's clock (not this machine's)
    ApiResult r = client->Post("/v1/teams/" + a->team + "/budget", body);
    if (!r.ok()) return Report(cmd, r);
    if (!limits) {
      std::printf("team %s: budget removed (no limits; spend is still counted and shown by gpufleet cost)\n",
                  a->team.c_str());
      return kExitOk;
    }
    std::printf("team %s: hard %s, soft %s, max %s/h, %s\n", a->team.c_str(),
                a->hard > 0 ? UsdExact(IntField(r.body, "hard_micros")).c_str() : "-",
                a->soft > 0 ? UsdExact(IntField(r.body, "soft_micros")).c_str() : "-",
                a->max_hourly > 0 ? UsdExact(IntField(r.body, "max_rate_micros")).c_str() : "-",
                a->period == "none" ? ("counting from " + FormatIso8601(Time::FromMillis(IntField(r.body, "since_ms")))).c_str()
                                    : (a->period + ", this period from " +
                                       FormatIso8601(Time::FromMillis(IntField(r.body, "since_ms")))).c_str());
    return kExitOk;
  };
}

// --- quota ----------------------------------------------------------------------------------

std::function<int()> SetupQuota(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string team;
    std::optional<int64_t> gpus, max_running, max_pending;
    std::string model;
    bool borrow = false, no_borrow = false, clear = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "quota", "Show team quotas and limits, or set a team's (admin): guaranteed GPUs, borrowing, job limits");
  sub->add_option("team", a->team, "The team to show or set (default: every team you may see)");
  sub->add_option("--gpus", a->gpus, "GPUs guaranteed to the team (of --model, else of any model); 0 removes it")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  sub->add_option("--model", a->model, "With --gpus: the GPU model they are of (H100, A100-80GB, ...)");
  auto* borrow = sub->add_flag("--borrow", a->borrow, "The team may use idle GPUs beyond its quota (the default)");
  sub->add_flag("--no-borrow", a->no_borrow, "The team never holds more than its quota")->excludes(borrow);
  sub->add_option("--max-running", a->max_running, "Jobs of the team running at once (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  sub->add_option("--max-pending", a->max_pending,
                  "Jobs of the team waiting at once; submits past it are refused (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  sub->add_flag("--clear", a->clear, "Start from no quota and no limits (alone: removes them)");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet quota                                      # every team's quota, limits and use
  gpufleet quota vision --gpus 32 --model H100 --borrow   # 32 H100s guaranteed, may borrow idle GPUs
  gpufleet quota vision --gpus 8 --no-borrow           # never more than 8 GPUs of any model
  gpufleet quota nlp --max-running 20 --max-pending 1000
  gpufleet quota nlp --clear                           # no quota, no limits
Quotas order fair-share (--policy fair-share) and what a reclaim gives back; with --no-borrow a team's
jobs wait ('gpufleet explain' says why) rather than go past its quota. Changes add to the team's
current quota; --clear starts afresh.)");
  return [a]() {
    const std::string cmd = "quota";
    const bool set = a->gpus || a->max_running || a->max_pending || a->borrow || a->no_borrow || a->clear;
    if (!a->model.empty() && !a->gpus) return Fail(cmd, kExitUsage, "--model needs --gpus (how many of them)");
    if (set && a->team.empty()) return Fail(cmd, kExitUsage, "name the team to set, e.g. gpufleet quota vision --gpus 8");
    if (Status st = api::CheckName("team", a->team); !a->team.empty() && !st.ok()) return Fail(cmd, kExitUsage, st.message());
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    if (set) {
      json body = json::object();
      if (a->gpus) body["gpus"] = *a->gpus;
      if (!a->model.empty()) body["model"] = a->model;
      if (a->borrow || a->no_borrow) body["borrow"] = a->borrow;
      if (a->max_running) body["max_running_jobs"] = *a->max_running;
      if (a->max_pending) body["max_pending_jobs"] = *a->max_pending;
      if (a->clear) body["clear"] = true;
      ApiResult r = client->Post("/v1/teams/" + a->team + "/quota", body);
      if (!r.ok()) return Report(cmd, r);
      if (a->output == "json") {
        PrintJson(r.body);
        return kExitOk;
      }
    }
    ApiResult r = client->Get(a->team.empty() ? std::string("/v1/quotas") : "/v1/quotas?team=" + a->team);
    if (!r.ok()) return Report(cmd, r);
    json teams = json::array();
    for (const auto& t : r.body.value("teams", json::array())) {
      if (a->team.empty() || StrField(t, "team") == a->team) teams.push_back(t);
    }
    if (a->output == "json") {
      PrintJson(json{{"teams", teams}});
      return kExitOk;
    }
    auto number = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, v == static_cast<int64_t>(v) ? "%.0f" : "%.2f", v);
      return std::string(buf);
    };
    auto of = [](int64_t n, int64_t limit) {
      return std::to_string(n) + (limit > 0 ? "/" + std::to_string(limit) : std::string());
    };
    Table t({"TEAM", "GUARANTEED GPUS", "BORROW", "GPUS IN USE", "RUNNING", "PENDING"});
    for (const auto& team : teams) {
      std::string q;
      if (IntField(team, "gpus") > 0) q = std::to_string(IntField(team, "gpus")) + " any";
      const json model_gpus = team.value("model_gpus", json::object());
      for (const auto& [m, g] : model_gpus.items()) {
        q += (q.empty() ? "" : ", ") + std::to_string(g.get<int64_t>()) + " " + m;
      }
      std::string used = number(team.value("used_gpus", 0.0));
      std::string by;
      const json by_model = team.value("used_gpus_by_model", json::object());
      for (const auto& [m, g] : by_model.items()) {
        by += (by.empty() ? "" : ", ") + number(g.get<double>()) + " " + m;
      }
      if (!by.empty()) used += " (" + by + ")";
      t.Add({StrField(team, "team"), q.empty() ? "-" : q, team.value("borrow", true) ? "yes" : "no", used,
             of(IntField(team, "running_jobs"), IntField(team, "max_running_jobs")),
             of(IntField(team, "pending_jobs"), IntField(team, "max_pending_jobs"))});
    }
    if (teams.empty()) {
      std::printf("no team has a quota or jobs%s\n", a->team.empty() ? "" : (" (team " + a->team + ")").c_str());
      return kExitOk;
    }
    t.Print();
    return kExitOk;
  };
}

// --- alerts ---------------------------------------------------------------------------------

std::function<int()> SetupAlerts(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    bool all = false;
    std::string name;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "alerts", "Show the controller's alerts: idle or hot GPUs, silent nodes, stalled jobs, budgets, queue wait");
  sub->add_flag("--all", a->all, "Also show pending alerts and those resolved within the last hour");
  sub->add_option("--name", a->name, "Only this rule (GpuHot, JobStalled, ...)");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet alerts                 # what is firing now
  gpufleet alerts --all           # and what is pending (not yet past its rule's 'for') or resolved
  gpufleet alerts --name JobStalled -o json
Rules and their settings: docs/observability.md (change them with 'gpufleet server --alert-rules FILE').
Firing alerts also go to the webhooks given with --alert-webhook, and show in /metrics as gpufleet_alert.)");
  return [a]() {
    const std::string cmd = "alerts";
    const std::vector<std::string>& rules = obs::AlertRuleNames();
    if (!a->name.empty() && std::find(rules.begin(), rules.end(), a->name) == rules.end()) {
      return Fail(cmd, kExitUsage, "--name: no alert rule is named '" + a->name + "'; the rules: " + Join(rules, ", "));
    }
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/alerts");
    if (!r.ok()) return Report(cmd, r);
    json alerts = json::array();
    for (const auto& al : r.body.value("alerts", json::array())) {
      if (!a->name.empty() && StrField(al, "name") != a->name) continue;
      if (!a->all && StrField(al, "state") != "firing") continue;
      alerts.push_back(al);
    }
    if (a->output == "json") {
      PrintJson(json{{"alerts", alerts}, {"enabled", r.body.value("enabled", true)}});
      return kExitOk;
    }
    if (alerts.empty()) {
      std::printf("no %salerts%s\n", a->all ? "" : "firing ", a->name.empty() ? "" : (" named " + a->name).c_str());
      if (!r.body.value("enabled", true)) std::printf("(the alert rules are turned off: enabled: false)\n");
      return kExitOk;
    }
    Table t({"STATE", "SEVERITY", "ALERT", "SINCE", "MESSAGE"});
    for (const auto& al : alerts) {
      std::string since = al.contains("fired_at") && al["fired_at"].is_string() ? StrField(al, "fired_at")
                                                                               : StrField(al, "started_at");
      if (StrField(al, "state") == "resolved" && al["resolved_at"].is_string()) since = StrField(al, "resolved_at");
      t.Add({StrField(al, "state"), StrField(al, "severity"), StrField(al, "name"), since, StrField(al, "message")});
    }
    t.Print(std::numeric_limits<size_t>::max());  // the message is the point: never cut it
    return kExitOk;
  };
}

// --- pool -----------------------------------------------------------------------------------

std::function<int()> SetupToken(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string role = "user";
    std::string team;
    std::string subject;
    std::string ttl;
    bool join = false;
    std::string output = "table";
    std::string id;
  };
  auto a = std::make_shared<Args>();
  CLI::App* token = app.add_subcommand("token", "Make, list and revoke API tokens (admins; team-admins for their team)");
  token->require_subcommand(1);
  CLI::App* create = token->add_subcommand("create", "Create a token and print it (it is shown only this once)");
  CLI::Option* role = create->add_option("--role", a->role, "admin, team-admin, user, viewer or metrics (docs/security.md)")
      ->check(CLI::IsMember({"admin", "team-admin", "user", "viewer", "metrics"}))
      ->capture_default_str();
  create->add_option("--team", a->team, "The team the token acts for (team-admins: always their own)");
  create->add_option("--subject", a->subject, "Who the token is for (a user name; shown in audit records)");
  create->add_option("--ttl", a->ttl, "Expire the token after this long (e.g. 30d, 12h); default: never");
  create->add_flag("--join", a->join, "A join token, for agents to register nodes with (admins; it has no role)")
      ->excludes(role);
  AddOutputFlag(create, a->output);
  AddConnectionFlags(create, a->conn);
  SetFooter(create, R"(  gpufleet token create --subject alice --team vision --ttl 90d
  gpufleet token create --role team-admin --subject carol --team vision
  gpufleet token create --role admin --subject ops
  gpufleet token create --join > join.token   # then: gpufleet agent --join-token-file join.token ...)");
  CLI::App* list = token->add_subcommand("list", "List tokens: id, kind, subject, role, team, created, expiry, last use");
  AddOutputFlag(list, a->output);
  AddConnectionFlags(list, a->conn);
  SetFooter(list, "  gpufleet token list\n  gpufleet token list -o json");
  CLI::App* revoke = token->add_subcommand("revoke", "Revoke a token: it is refused from now on");
  revoke->add_option("id", a->id, "The token's id as 'gpufleet token list' shows it (8 or more hex digits)")->required();
  AddConnectionFlags(revoke, a->conn);
  SetFooter(revoke, "  gpufleet token revoke 4f9c0d2e8a7b");
  token->footer(std::string("Examples:\n  gpufleet token create --subject alice --team vision\n  gpufleet token list\n"
                            "  gpufleet token revoke 4f9c0d2e8a7b\n") +
                kExitCodes);
  return [a, create, list, revoke]() {
    if (list->parsed()) {
      const std::string cmd = "token list";
      auto client = Connect(cmd, a->conn);
      if (!client) return kExitUsage;
      ApiResult r = client->Get("/v1/tokens");
      if (!r.ok()) return Report(cmd, r);
      if (a->output == "json") {
        PrintJson(r.body);
        return kExitOk;
      }
      auto tokens = DecodeList(r.body, "tokens", &api::TokenSummaryFromJson);
      if (!tokens.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + tokens.status().message());
      Table t({"ID", "KIND", "SUBJECT", "ROLE", "TEAM", "CREATED", "EXPIRES", "LAST USED", "STATE", "MADE BY"});
      for (const api::TokenSummary& k : *tokens) {
        const int64_t expires = k.expires ? k.expires->millis() : 0;
        const int64_t used = k.last_used ? k.last_used->millis() : 0;
        const bool expired = expires > 0 && expires <= NowMs();
        t.Add({k.id, api::TokenKindName(k.kind), k.subject, k.role, k.team, Ago(k.created.millis()),
               expires > 0 ? Iso(expires) : "never", used > 0 ? Ago(used) : "never",
               k.revoked ? "revoked" : expired ? "expired" : "active", k.made_by.empty() ? "-" : k.made_by});
      }
      t.Print();
      return kExitOk;
    }
    if (revoke->parsed()) {
      const std::string cmd = "token revoke";
      // Ids are lower-case hex as `token list` shows them; anything else would ask for no route.
      std::string id = a->id;
      for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (a->id.rfind("gf_", 0) == 0) {
        return Fail(cmd, kExitUsage,
                    "that is a token, not its id (and is now in your shell's history: revoke it): give the ID "
                    "column of 'gpufleet token list'");
      }
      if (id.size() < 8 || id.size() > 64 || id.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return Fail(cmd, kExitUsage,
                    "'" + RedactSecrets(Printable(a->id)) + "' is not a token id: give 8 to 64 of the hex digits in the "
                    "ID column of 'gpufleet token list'");
      }
      a->id = id;
      auto client = Connect(cmd, a->conn);
      if (!client) return kExitUsage;
      ApiResult r = client->Post("/v1/tokens/" + a->id + "/revoke", json::object());
      if (!r.ok()) return Report(cmd, r);
      json body = r.body;
      json also = body.is_object() && body.contains("also_revoked") ? body["also_revoked"] : json::array();
      if (body.is_object()) body.erase("also_revoked");
      auto token = api::TokenSummaryFromJson(body);
      if (!token.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + token.status().message());
      std::printf("revoked token %s (%s%s)\n", token->id.c_str(), token->role.c_str(),
                  token->subject.empty() ? "" : (" of " + Printable(token->subject)).c_str());
      if (also.is_array() && !also.empty()) {
        std::vector<std::string> ids;
        for (const auto& id : also) ids.push_back(id.is_string() ? id.get<std::string>() : id.dump());
        std::printf("also revoked %zu token(s) it made: %s\n", ids.size(), Join(ids, ", ").c_str());
      }
      return kExitOk;
    }
    (void)create;
    const std::string cmd = "token create";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    json body = {{"kind", a->join ? "join" : "user"}, {"subject", a->subject}, {"team", a->team}};
    if (!a->join) body["role"] = a->role;  // a join token has none
    if (!a->ttl.empty()) body["ttl"] = a->ttl;
    ApiResult r = client->Post("/v1/tokens", body);
    if (!r.ok()) return Report(cmd, r);
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    std::printf("%s\n", StrField(r.body, "token").c_str());
    const std::string kind = a->join ? "join" : StrField(r.body, "role");
    std::fprintf(stderr, "created %s %s token %s%s%s%s; it is shown only this once\n", kind == "admin" ? "an" : "a",
                 kind.c_str(), StrField(r.body, "id").c_str(),
                 StrField(r.body, "subject").empty() ? "" : (" for " + StrField(r.body, "subject")).c_str(),
                 StrField(r.body, "team").empty() ? "" : (" (team " + StrField(r.body, "team") + ")").c_str(),
                 IntField(r.body, "expires_ms") > 0 ? (", expires " + Iso(IntField(r.body, "expires_ms"))).c_str() : "");
    return kExitOk;
  };
}

std::function<int()> SetupAudit(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string since;
    std::string subject;
    std::string verb;
    int limit = 100;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("audit", "The audit log: who changed what, and what was refused (admin)");
  sub->add_option("--since", a->since, "Only records of the last DURATION (e.g. 1d, 30m)");
  sub->add_option("--subject", a->subject, "Only this token subject's records");
  sub->add_option("--verb", a->verb, "Only this verb (job.submit), or a family ending in '.' (job.)");
  sub->add_option("--limit", a->limit, "At most this many records, oldest first")->check(CLI::Range(1, 1000000));
  sub->add_option("-o,--output", a->output, "table, json or jsonl")->transform(CLI::Transformer(std::map<std::string, std::string>{{"text", "table"}}))->check(CLI::IsMember({"table", "json", "jsonl"}))
      ->capture_default_str();
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet audit --since 1d
  gpufleet audit --verb job. --subject alice
  gpufleet audit --verb auth.login -o jsonl     # failed logins, one JSON object a line)");
  return [a]() {
    const std::string cmd = "audit";
    std::map<std::string, std::string> q;
    if (!a->since.empty()) {
      auto since = SinceQuery(a->since, "1d or 30m");
      if (!since.ok()) return Fail(cmd, kExitUsage, since.status().message());
      q["since_ms"] = *since;
    }
    if (!a->subject.empty()) q["subject"] = a->subject;
    if (!a->verb.empty()) q["verb"] = a->verb;
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    std::vector<api::AuditRecord> records;
    int64_t cursor = 0;
    bool more = false;  // records after the last one shown
    for (;;) {
      // One more than wanted: whether any follow the last one shown.
      const int64_t want = a->limit - static_cast<int64_t>(records.size());
      q["limit"] = std::to_string(std::min<int64_t>(1000, want + 1));
      if (cursor > 0) q["cursor"] = std::to_string(cursor);
      ApiResult r = client->Get("/v1/audit", q);
      if (!r.ok()) return Report(cmd, r);
      auto page = DecodeAuditList(r.body);
      if (!page.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + page.status().message());
      for (auto& rec : *page) {
        if (static_cast<int64_t>(records.size()) == a->limit) {
          more = true;
          break;
        }
        records.push_back(std::move(rec));
      }
      cursor = IntField(r.body, "next_cursor");
      if (more || cursor <= 0) break;
    }
    if (more) {
      // Cut at --limit with records after it: say so, or the newest would be missed unseen.
      std::fprintf(stderr,
                   "gpufleet audit: the oldest %zu records shown; later ones follow (raise --limit, or narrow with "
                   "--since, --subject or --verb)\n",
                   records.size());
    }
    if (a->output == "json") {
      json list = json::array();
      for (const auto& rec : records) list.push_back(api::ToJson(rec));
      PrintJson(json{{"records", list}});
      return kExitOk;
    }
    if (a->output == "jsonl") {
      for (const auto& rec : records) std::printf("%s\n", api::ToJson(rec).dump().c_str());
      return kExitOk;
    }
    auto dash = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
    if (records.empty()) {
      std::printf("no audit records match\n");
      return kExitOk;
    }
    Table t({"TIME", "SUBJECT", "ROLE", "SOURCE", "VERB", "OBJECT", "OUTCOME", "WHY"});
    for (const api::AuditRecord& rec : records) {
      // (An object longer than a column should be, such as a submit of many scattered ids, is cut
      // here; -o json gives it whole.)
      std::string object = rec.object.size() > 48 ? rec.object.substr(0, 45) + "..." : rec.object;
      t.Add({Iso(rec.at.millis()), dash(rec.subject), dash(rec.role), rec.source, rec.verb, std::move(object),
             rec.outcome, rec.reason});
    }
    t.Print(140);
    return kExitOk;
  };
}

}  // namespace

std::function<int()> SetupCostCommand(CLI::App& app) { return SetupCost(app); }
std::function<int()> SetupBudgetCommand(CLI::App& app) { return SetupBudget(app); }
std::function<int()> SetupQuotaCommand(CLI::App& app) { return SetupQuota(app); }
std::function<int()> SetupAlertsCommand(CLI::App& app) { return SetupAlerts(app); }
std::function<int()> SetupTokenCommand(CLI::App& app) { return SetupToken(app); }
std::function<int()> SetupAuditCommand(CLI::App& app) { return SetupAudit(app); }

}  // namespace gpufleet::cli

#include "controller/rbac.h"

#include <regex>
#include <set>

namespace gpufleet::controller {

const std::vector<Role>& AllRoles() {
  static const std::vector<Role> roles = {Role::kAdmin, Role::kTeamAdmin, Role::kUser, Role::kViewer,
                                          Role::kMetrics, Role::kAgent, Role::kJoin};
  return roles;
}

const char* RoleName(Role r) {
  switch (r) {
    case Role::kAdmin: return "admin";
    case Role::kTeamAdmin: return "team-admin";
    case Role::kUser: return "user";
    case Role::kViewer: return "viewer";
    case Role::kMetrics: return "metrics";
    case Role::kAgent: return "agent";
    case Role::kJoin: return "join";
  }
  return "?";
}

std::optional<Role> ParseRole(const std::string& name) {
  for (Role r : AllRoles()) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

const char* VerbName(Verb v) {
  switch (v) {
    case Verb::kHealth: return "health";
    case Verb::kJobSubmit: return "submit jobs";
    case Verb::kJobRead: return "read jobs";
    case Verb::kJobCancel: return "cancel jobs";
    case Verb::kJobLogs: return "read job logs";
    case Verb::kQueueRead: return "read the queue";
    case Verb::kNodeRead: return "read nodes";
    case Verb::kNodeDrain: return "drain nodes";
    case Verb::kCostRead: return "read costs";
    case Verb::kPoolRead: return "read the pool";
    case Verb::kBudgetSet: return "set budgets";
    case Verb::kQuotaSet: return "set quotas";
    case Verb::kQuotaRead: return "read quotas";
    case Verb::kTokenCreate: return "create tokens";
    case Verb::kTokenRead: return "list tokens";
    case Verb::kTokenRevoke: return "revoke tokens";
    case Verb::kAuditRead: return "read the audit log";
    case Verb::kAgentRegister: return "register nodes";
    case Verb::kAgentReport: return "report as an agent";
    case Verb::kMetricsRead: return "read metrics";
    case Verb::kAlertRead: return "read alerts";
    case Verb::kWebUi: return "load the dashboard";
  }
  return "?";
}

const char* AuditVerb(Verb v) {
  switch (v) {
    case Verb::kHealth: return "health";
    case Verb::kJobSubmit: return "job.submit";
    case Verb::kJobRead: return "job.read";
    case Verb::kJobCancel: return "job.cancel";
    case Verb::kJobLogs: return "job.logs";
    case Verb::kQueueRead: return "queue.read";
    case Verb::kNodeRead: return "node.read";
    case Verb::kNodeDrain: return "node.drain";
    case Verb::kCostRead: return "cost.read";
    case Verb::kPoolRead: return "pool.read";
    case Verb::kBudgetSet: return "budget.set";
    case Verb::kQuotaSet: return "quota.set";
    case Verb::kQuotaRead: return "quota.read";
    case Verb::kTokenCreate: return "token.create";
    case Verb::kTokenRead: return "token.read";
    case Verb::kTokenRevoke: return "token.revoke";
    case Verb::kAuditRead: return "audit.read";
    case Verb::kAgentRegister: return "node.register";
    case Verb::kAgentReport: return "agent.report";
    case Verb::kMetricsRead: return "metrics.read";
    case Verb::kAlertRead: return "alert.read";
    case Verb::kWebUi: return "ui.load";
  }
  return "?";
}

const std::vector<std::string>& AuditVerbNames() {
  static const std::vector<std::string> names = [] {
    std::set<std::string> all = {"node.undrain", "node.check", "auth.login", "request", "pool.rent", "pool.release"};
    // Every route's verb but those anyone may use (health, the dashboard's files), which are
    // never refused and change nothing, so never recorded.
    for (int v = static_cast<int>(Verb::kHealth); v <= static_cast<int>(Verb::kWebUi); ++v) {
      if (v != static_cast<int>(Verb::kHealth) && v != static_cast<int>(Verb::kWebUi)) {
        all.insert(AuditVerb(static_cast<Verb>(v)));
      }
    }
    return std::vector<std::string>(all.begin(), all.end());
  }();
  return names;
}

bool Mutates(Verb v) {
  switch (v) {
    case Verb::kJobSubmit:
    case Verb::kJobCancel:
    case Verb::kNodeDrain:
    case Verb::kBudgetSet:
    case Verb::kQuotaSet:
    case Verb::kTokenCreate:
    case Verb::kTokenRevoke:
    case Verb::kAgentRegister:
      return true;
    default:
      return false;
  }
}

std::optional<Role> RoleOf(const api::TokenRecord& token) {
  switch (token.kind) {
    case api::TokenKind::kAgent: return Role::kAgent;
    case api::TokenKind::kJoin: return Role::kJoin;
    case api::TokenKind::kUser: {
      auto r = ParseRole(token.role);
      if (!r || *r == Role::kAgent || *r == Role::kJoin) return std::nullopt;
      return r;
    }
  }
  return std::nullopt;
}

std::string TeamOf(const api::TokenRecord& token) { return token.team.empty() ? "default" : token.team; }

Scope ScopeOf(Role role, Verb verb) {
  if (verb == Verb::kHealth || verb == Verb::kWebUi) return Scope::kAll;
  if (verb == Verb::kMetricsRead) return role == Role::kAdmin || role == Role::kMetrics ? Scope::kAll : Scope::kNone;
  switch (role) {
    case Role::kAdmin:
      return verb == Verb::kAgentRegister || verb == Verb::kAgentReport ? Scope::kNone : Scope::kAll;
    case Role::kTeamAdmin:
      switch (verb) {
        case Verb::kJobRead:
        case Verb::kQueueRead:
        case Verb::kNodeRead:
        case Verb::kPoolRead:
        case Verb::kAlertRead:
          return Scope::kAll;
        case Verb::kJobSubmit:
        case Verb::kJobCancel:
        case Verb::kJobLogs:
        case Verb::kCostRead:
        case Verb::kQuotaRead:
        case Verb::kTokenCreate:
        case Verb::kTokenRead:
        case Verb::kTokenRevoke:
          return Scope::kOwnTeam;
        default:
          return Scope::kNone;
      }
    case Role::kUser:
      switch (verb) {
        case Verb::kJobRead:
        case Verb::kQueueRead:
        case Verb::kNodeRead:
        case Verb::kPoolRead:
        case Verb::kAlertRead:
          return Scope::kAll;
        case Verb::kJobSubmit:
        case Verb::kJobCancel:
        case Verb::kJobLogs:
        case Verb::kCostRead:
        case Verb::kQuotaRead:
          return Scope::kOwnTeam;
        default:
          return Scope::kNone;
      }
    case Role::kViewer:
      switch (verb) {
        case Verb::kJobRead:
        case Verb::kQueueRead:
        case Verb::kNodeRead:
        case Verb::kPoolRead:
        case Verb::kAlertRead:
          return Scope::kAll;
        case Verb::kJobLogs:
        case Verb::kCostRead:
        case Verb::kQuotaRead:
          return Scope::kOwnTeam;
        default:
          return Scope::kNone;
      }
    case Role::kMetrics:
      return Scope::kNone;  // the metrics endpoint only (above)
    case Role::kAgent:
      return verb == Verb::kAgentRegister || verb == Verb::kAgentReport ? Scope::kOwnTeam : Scope::kNone;
    case Role::kJoin:
      return verb == Verb::kAgentRegister ? Scope::kAll : Scope::kNone;
  }
  return Scope::kNone;
}

bool MayMakeRole(Role role, Role made) {
  if (role == Role::kAdmin) return made != Role::kAgent;  // agent tokens come from registration
  if (role == Role::kTeamAdmin) return made == Role::kTeamAdmin || made == Role::kUser || made == Role::kViewer;
  return false;
}

const std::vector<RouteRule>& ApiRoutes() {
  static const std::vector<RouteRule> routes = {
      {"GET", "/v1/health", "/v1/health", Verb::kHealth, false},
      {"GET", "/v1/leader", "/v1/leader", Verb::kHealth, false},
      {"POST", "/v1/jobs", "/v1/jobs", Verb::kJobSubmit, false},
      {"GET", "/v1/jobs", "/v1/jobs", Verb::kJobRead, false},
      {"GET", R"(/v1/jobs/(\d+))", "/v1/jobs/1", Verb::kJobRead, false},
      {"POST", R"(/v1/jobs/(\d+)/cancel)", "/v1/jobs/1/cancel", Verb::kJobCancel, false},
      {"POST", "/v1/jobs/cancel", "/v1/jobs/cancel", Verb::kJobCancel, false},
      {"GET", R"(/v1/jobs/(\d+)/explain)", "/v1/jobs/1/explain", Verb::kJobRead, false},
      {"GET", R"(/v1/jobs/(\d+)/logs)", "/v1/jobs/1/logs", Verb::kJobLogs, false},
      {"GET", R"(/v1/jobs/(\d+)/gpus)", "/v1/jobs/1/gpus", Verb::kJobRead, false},
      {"GET", "/v1/queue", "/v1/queue", Verb::kQueueRead, false},
      {"GET", "/v1/nodes", "/v1/nodes", Verb::kNodeRead, false},
      {"POST", R"(/v1/nodes/([A-Za-z0-9._-]+)/drain)", "/v1/nodes/n1/drain", Verb::kNodeDrain, false},
      {"POST", R"(/v1/nodes/([A-Za-z0-9._-]+)/undrain)", "/v1/nodes/n1/undrain", Verb::kNodeDrain, false},
      {"POST", R"(/v1/nodes/([A-Za-z0-9._-]+)/check)", "/v1/nodes/n1/check", Verb::kNodeDrain, false},
      {"GET", "/v1/cost", "/v1/cost", Verb::kCostRead, false},
      {"GET", "/v1/pool", "/v1/pool", Verb::kPoolRead, false},
      {"POST", R"(/v1/teams/([^/]+)/budget)", "/v1/teams/vision/budget", Verb::kBudgetSet, false},
      {"POST", R"(/v1/teams/([^/]+)/quota)", "/v1/teams/vision/quota", Verb::kQuotaSet, false},
      {"GET", "/v1/quotas", "/v1/quotas", Verb::kQuotaRead, false},
      {"POST", "/v1/tokens", "/v1/tokens", Verb::kTokenCreate, false},
      {"GET", "/v1/tokens", "/v1/tokens", Verb::kTokenRead, false},
      {"POST", R"(/v1/tokens/([0-9a-f]{1,64})/revoke)", "/v1/tokens/0123456789ab/revoke", Verb::kTokenRevoke, false},
      {"GET", "/v1/audit", "/v1/audit", Verb::kAuditRead, false},
      {"GET", "/v1/alerts", "/v1/alerts", Verb::kAlertRead, false},
      {"GET", "/metrics", "/metrics", Verb::kMetricsRead, false},
      {"GET", "/", "/", Verb::kWebUi, false},
      {"GET", R"(/ui/[A-Za-z0-9._/-]*)", "/ui/app.js", Verb::kWebUi, false},
      {"GET", "/v1/health", "/v1/health", Verb::kHealth, true},
      {"POST", "/v1/agents/register", "/v1/agents/register", Verb::kAgentRegister, true},
      {"POST", "/v1/agents/heartbeat", "/v1/agents/heartbeat", Verb::kAgentReport, true},
      {"GET", "/v1/agents/commands", "/v1/agents/commands", Verb::kAgentReport, true},
      {"POST", "/v1/agents/logs", "/v1/agents/logs", Verb::kAgentReport, true},
  };
  return routes;
}

const RouteRule* FindRoute(const std::string& method, const std::string& path, bool agents) {
  static const std::vector<std::regex> compiled = [] {
    std::vector<std::regex> out;
    for (const auto& r : ApiRoutes()) out.emplace_back(r.pattern);
    return out;
  }();
  const auto& routes = ApiRoutes();
  for (size_t i = 0; i < routes.size(); ++i) {
    if (routes[i].agents == agents && method == routes[i].method && std::regex_match(path, compiled[i])) {
      return &routes[i];
    }
  }
  return nullptr;
}

bool AlertVisible(const std::string& name, const std::map<std::string, std::string>& labels, bool admin,
                  const std::string& team) {
  if (admin || (name != "BudgetNearlySpent" && name != "JobStalled")) return true;
  auto it = labels.find("team");
  return it != labels.end() && it->second == team;
}

}  // namespace gpufleet::controller

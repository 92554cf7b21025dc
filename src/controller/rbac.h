// Roles, verbs and the route table: who may do what through the API (docs/security.md).
//
// Deny by default. Every route the controller serves is a row of ApiRoutes() naming the one verb
// it needs; a request for a route not in the table is not served, and a token is let through only
// if its role holds the route's verb (Holds). A verb a role holds for its own team only (Scope
// kOwnTeam) is narrowed further by the handler: a user's token reads every team's job list, but
// the commands, environment, logs and cost details of its own team's jobs only.
//
// The table is data, so the route x role matrix test and the matrix in docs/security.md are
// checked against it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/records.h"

namespace gpufleet::controller {

enum class Role { kAdmin, kTeamAdmin, kUser, kViewer, kMetrics, kAgent, kJoin };
enum class Verb {
  kHealth,        // GET /v1/health: anyone
  kJobSubmit,
  kJobRead,       // lists and one job; other teams' jobs without command, env or checkpoint dir
  kJobCancel,
  kJobLogs,
  kQueueRead,
  kNodeRead,
  kNodeDrain,
  kCostRead,      // other teams' job costs hidden below admin
  kPoolRead,
  kBudgetSet,
  kQuotaSet,
  kQuotaRead,     // non-admins: their own team's quota and load
  kTokenCreate,   // team-admins: tokens of their team, roles up to their own
  kTokenRead,
  kTokenRevoke,
  kAuditRead,
  kAgentRegister,
  kAgentReport,   // heartbeats, commands, logs of the agent's own node
  kMetricsRead,   // GET /metrics: admins and metrics tokens
  kAlertRead,     // GET /v1/alerts
  kWebUi,         // the dashboard's static files: anyone (they hold no data; it calls the API with a token)
};
enum class Scope { kNone, kOwnTeam, kAll };

const std::vector<Role>& AllRoles();
const char* RoleName(Role r);
std::optional<Role> ParseRole(const std::string& name);  // the user-token roles and agent/join
const char* VerbName(Verb v);
// The verb as the audit log names it ("job.submit", "token.revoke", ...), and whether it changes
// anything (every change is audited; reads only when refused).
const char* AuditVerb(Verb v);
// Every verb an audit record may carry (the routes' verbs, and node.undrain, node.check,
// auth.login, request, pool.rent, pool.release), sorted: what GET /v1/audit?verb= may filter on.
const std::vector<std::string>& AuditVerbNames();
bool Mutates(Verb v);

// The token's role: its kind for agent and join tokens, its role for user tokens (none for an
// unknown role name).
std::optional<Role> RoleOf(const api::TokenRecord& token);
// The team a token acts for: its team, or "default" for a team-less non-admin token.
std::string TeamOf(const api::TokenRecord& token);

Scope ScopeOf(Role role, Verb verb);
inline bool Holds(Role role, Verb verb) { return ScopeOf(role, verb) != Scope::kNone; }
// Whether a token of `role` may make a token of `made` (team-admins: team-admin, user, viewer).
bool MayMakeRole(Role role, Role made);

struct RouteRule {
  const char* method;   // GET or POST
  const char* pattern;  // cpp-httplib's regex
  const char* example;  // a concrete path, for tests and docs
  Verb verb;
  bool agents;          // served on the agent listener (else on the API listener)
};
// Whether a token of `team` (or an admin) may read an alert: every role reads the cluster's
// alerts, except another team's BudgetNearlySpent (it names the team's spend) and JobStalled
// (the job's last step, which GET /v1/jobs/{id} hides from other teams).
bool AlertVisible(const std::string& name, const std::map<std::string, std::string>& labels, bool admin,
                  const std::string& team);

const std::vector<RouteRule>& ApiRoutes();
// The rule for a request, or nullptr: a route not in the table is not served.
const RouteRule* FindRoute(const std::string& method, const std::string& path, bool agents);

}  // namespace gpufleet::controller

// SPDX-License-Identifier: Apache-2.0
#include "admin/cli.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "nlockd_build_info.hpp"

namespace nlockd::admin {
namespace {

using nlohmann::json;

constexpr const char* kDefaultServer = "http://127.0.0.1:9464";

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string Encode(std::string_view text) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kDigits[byte >> 4]);
      out.push_back(kDigits[byte & 0xf]);
    }
  }
  return out;
}

class QueryString {
 public:
  void Add(std::string_view key, const std::string& value) {
    if (value.empty()) return;
    text_ += text_.empty() ? '?' : '&';
    text_ += key;
    text_ += '=';
    text_ += Encode(value);
  }
  void Add(std::string_view key, std::optional<size_t> value) {
    if (value) Add(key, std::to_string(*value));
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A JSON value as table text: strings bare, null as "-".
std::string Cell(const json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  if (value.is_number_float()) return fmt::format("{:.1f}", value.get<double>());
  return value.dump();
}

void PrintTable(std::ostream& out, const std::vector<std::string>& headers,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) widths[i] = headers[i].size();
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  const auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  };
  print_row(headers);
  for (const auto& row : rows) print_row(row);
}

// Prints the rows of a list answer ({"<key>": [...], "total": N, ...}) under `columns`, each a
// (header, field) pair.
void PrintList(std::ostream& out, const json& answer, const char* key,
               const std::vector<std::pair<std::string, std::string>>& columns) {
  std::vector<std::string> headers;
  headers.reserve(columns.size());
  for (const auto& [header, field] : columns) headers.push_back(header);
  std::vector<std::vector<std::string>> rows;
  rows.reserve(answer.at(key).size());
  for (const json& item : answer.at(key)) {
    std::vector<std::string> row;
    row.reserve(columns.size());
    for (const auto& [header, field] : columns) row.push_back(Cell(item.value(field, json())));
    rows.push_back(std::move(row));
  }
  PrintTable(out, headers, rows);
  const size_t shown = answer.at(key).size();
  const size_t total = answer.value("total", shown);
  if (shown < total) {
    out << "(" << shown << " of " << total << "; next: --offset " << Cell(answer["next_offset"])
        << ")\n";
  }
}

void PrintFields(std::ostream& out, const json& object, const std::string& indent = "") {
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) {
      out << indent << key << ":\n";
      PrintFields(out, value, indent + "  ");
    } else if (!value.is_array()) {
      out << indent << key << ": " << Cell(value) << '\n';
    }
  }
}

const std::vector<std::pair<std::string, std::string>> kLockColumns = {
    {"FILE", "file"},      {"HOST", "host"},
    {"SVID", "svid"},      {"OWNER", "owner"},
    {"OFFSET", "offset"},  {"LENGTH", "length"},
    {"EXCL", "exclusive"}, {"RECLAIM", "awaiting_reclaim"}};
const std::vector<std::pair<std::string, std::string>> kShareColumns = {
    {"FILE", "file"},     {"HOST", "host"}, {"OWNER", "owner"},
    {"ACCESS", "access"}, {"DENY", "deny"}, {"RECLAIM", "awaiting_reclaim"}};
const std::vector<std::pair<std::string, std::string>> kWaiterColumns = {
    {"ID", "id"},          {"FILE", "file"},       {"HOST", "host"},
    {"SVID", "svid"},      {"OFFSET", "offset"},   {"LENGTH", "length"},
    {"EXCL", "exclusive"}, {"GRANTED", "granted"}, {"SECONDS", "seconds"}};

// One API call: the method, path and body, and how to print a successful answer.
struct Request {
  std::string method = "GET";
  std::string path;
  std::string body;
  void (*print)(std::ostream&, const json&) = nullptr;
};

void PrintStatus(std::ostream& out, const json& answer) { PrintFields(out, answer); }

void PrintClients(std::ostream& out, const json& answer) {
  PrintList(out, answer, "clients",
            {{"ID", "id"},
             {"MON_NAME", "mon_name"},
             {"MY_NAME", "my_name"},
             {"PROG", "my_prog"},
             {"VERS", "my_vers"},
             {"PROC", "my_proc"},
             {"FROM", "source_address"}});
}

void PrintDeleted(std::ostream& out, const json& answer) {
  out << "deleted registration " << Cell(answer.at("deleted")) << '\n';
}

void PrintHosts(std::ostream& out, const json& answer) {
  PrintList(out, answer, "hosts",
            {{"NAME", "name"},
             {"LABEL", "label"},
             {"LOCKS", "locks"},
             {"SHARES", "shares"},
             {"WAITERS", "waiters"},
             {"MONITORED", "monitored"},
             {"NSM_STATE", "nsm_state"},
             {"IDLE_S", "last_seen_seconds_ago"}});
}

void PrintHost(std::ostream& out, const json& answer) {
  PrintFields(out, answer);
  const std::pair<const char*, const std::vector<std::pair<std::string, std::string>>*> sections[] =
      {{"lock_list", &kLockColumns},
       {"share_list", &kShareColumns},
       {"waiter_list", &kWaiterColumns}};
  for (const auto& [key, columns] : sections) {
    const json& items = answer.at(key);
    if (items.empty()) continue;
    out << '\n';
    PrintList(out, {{key, items}, {"total", items.size()}}, key, *columns);
  }
}

void PrintReleased(std::ostream& out, const json& answer) {
  const json& released = answer.at("released");
  out << "released " << Cell(released.at("locks")) << " locks, " << Cell(released.at("shares"))
      << " shares, " << Cell(released.at("waiters")) << " waiters of " << Cell(answer.at("host"))
      << "; granted " << Cell(answer.at("waiters_granted")) << " waiting requests\n";
}

void PrintLocks(std::ostream& out, const json& answer) {
  PrintList(out, answer, "locks", kLockColumns);
}

void PrintShares(std::ostream& out, const json& answer) {
  PrintList(out, answer, "shares", kShareColumns);
}

void PrintWaiters(std::ostream& out, const json& answer) {
  PrintList(out, answer, "waiters", kWaiterColumns);
}

// Who waits on whom: one row per queued waiter and lock it waits for. A holder whose
// HOLDER_WAITS is "-" is not blocked itself: the chain ends there, and that is the client to
// look at (or release) to let the others go on.
void PrintWaits(std::ostream& out, const json& answer) {
  const std::vector<std::string> headers = {"WAITER", "HOST",        "SVID",        "FILE",
                                            "OFFSET", "LENGTH",      "EXCL",        "WAITS_FOR",
                                            "SVID",   "HELD_OFFSET", "HELD_LENGTH", "HOLDER_WAITS"};
  std::vector<std::vector<std::string>> rows;
  for (const json& waiter : answer.at("waiters")) {
    if (waiter.value("granted", false)) continue;
    const std::vector<std::string> row = {Cell(waiter["id"]),       Cell(waiter["host"]),
                                          Cell(waiter["svid"]),     Cell(waiter["file"]),
                                          Cell(waiter["offset"]),   Cell(waiter["length"]),
                                          Cell(waiter["exclusive"])};
    const json blocked_by = waiter.value("blocked_by", json::array());
    for (const json& holder : blocked_by) {
      std::string waits;
      for (const json& id : holder.value("waiting", json::array())) {
        waits += (waits.empty() ? "" : ",") + Cell(id);
      }
      std::vector<std::string> line = row;
      line.insert(line.end(), {Cell(holder["host"]), Cell(holder["svid"]), Cell(holder["offset"]),
                               Cell(holder["length"]), waits.empty() ? "-" : waits});
      rows.push_back(std::move(line));
    }
    const uint64_t blockers = waiter.value("blockers", uint64_t{0});
    if (blockers > blocked_by.size()) {
      std::vector<std::string> line = row;
      line.insert(line.end(),
                  {fmt::format("(+{} more)", blockers - blocked_by.size()), "", "", "", ""});
      rows.push_back(std::move(line));
    }
  }
  PrintTable(out, headers, rows);
  const size_t shown = answer.at("waiters").size();
  const size_t total = answer.value("total", shown);
  if (shown < total) {
    out << "(" << shown << " of " << total << " waiters; next: --offset "
        << Cell(answer["next_offset"]) << ")\n";
  }
}

void PrintGrace(std::ostream& out, const json& answer) { PrintFields(out, answer); }

void PrintNotify(std::ostream& out, const json& answer) {
  out << "queued SM_NOTIFY to " << Cell(answer.at("queued_hosts")) << " hosts\n";
}

void PrintServiceRelease(std::ostream& out, const json& answer) {
  out << "releasing service " << Cell(answer.at("service")) << " (epoch "
      << Cell(answer.at("epoch")) << "): a standby takes it over\n";
}

int Execute(const std::string& server, const std::string& token, bool as_json,
            const Request& request, std::ostream& out, std::ostream& err) {
  httplib::Client client(server);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  if (!token.empty()) client.set_bearer_token_auth(token);
  httplib::Result result = request.method == "GET" ? client.Get(request.path)
                           : request.method == "DELETE"
                               ? client.Delete(request.path)
                               : client.Post(request.path, request.body, "application/json");
  if (!result) {
    err << "nlockctl: cannot reach " << server << ": " << httplib::to_string(result.error())
        << '\n';
    return kCliUnreachable;
  }
  const json answer = json::parse(result->body, nullptr, /*allow_exceptions=*/false);
  if (result->status >= 400) {
    std::string message = result->body;
    if (answer.is_object() && answer.contains("error")) {
      message =
          answer["error"].value("message", "") + " (" + answer["error"].value("code", "") + ")";
    }
    err << "nlockctl: server answered " << result->status << ": " << message << '\n';
    return kCliServerError;
  }
  if (answer.is_discarded()) {
    err << "nlockctl: the server's answer is not JSON\n";
    return kCliServerError;
  }
  if (as_json) {
    out << answer.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
  } else {
    request.print(out, answer);
  }
  return kCliOk;
}

// The token in `path` (its first line; a relative path is looked up in the credentials
// directory when there is one). nullopt, with the reason in `error`, when it cannot be read.
std::optional<std::string> ReadTokenFile(std::string path, const CliEnvironment& environment,
                                         std::string& error) {
  if (!path.empty() && path.front() != '/' && environment.credentials_directory) {
    path = *environment.credentials_directory + "/" + path;
  }
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) {
    error = fmt::format("cannot read the token file {}", path);
    return std::nullopt;
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) {
    error = fmt::format("the token file {} is empty", path);
    return std::nullopt;
  }
  return token;
}

// What a command takes from the command line besides the global options.
enum class Arguments {
  kNone,
  kPaging,          // --limit, --offset
  kClientFilters,   // --mon-name, --my-name, then paging
  kStateFilters,    // --host, --file, then paging
  kRegistrationId,  // ID, required
  kHostName,        // NAME, required
  kNotifyHost,      // HOST, optional: the body names it
};

// One nlockctl command: where it sits, what it asks the API and how the answer is printed.
// `path` has "{}" where a positional argument goes (percent-encoded); the query string of the
// filters and paging is appended to it.
struct Command {
  const char* group;  // The parent command; nullptr: a command of its own.
  const char* name;
  const char* help;
  Arguments arguments;
  const char* method;
  const char* path;
  const char* body;  // Sent with POST (kNotifyHost: when no host is named).
  void (*print)(std::ostream&, const json&);
};

struct Group {
  const char* name;
  const char* help;
};

// The parent commands, added where kCommands first names them.
constexpr Group kGroups[] = {
    {"clients", "NSM monitor registrations (SM_MON)"},
    {"hosts", "Client hosts known to the lock manager"},
    {"locks", "Byte-range locks held"},
    {"shares", "DOS share reservations held (NLM SHARE)"},
    {"waiters", "Blocked lock requests"},
    {"grace", "The grace period after a restart"},
    {"service", "The HA service this node serves (ha = true)"},
};

constexpr Command kCommands[] = {
    {nullptr, "status", "State number, grace period and counts", Arguments::kNone, "GET",
     "/api/v1/status", "", PrintStatus},
    {"clients", "list", "List registrations", Arguments::kClientFilters, "GET", "/api/v1/clients",
     "", PrintClients},
    {"clients", "show", "Show one registration", Arguments::kRegistrationId, "GET",
     "/api/v1/clients/{}", "", PrintStatus},
    {"clients", "delete", "Delete one registration (as SM_UNMON)", Arguments::kRegistrationId,
     "DELETE", "/api/v1/clients/{}", "", PrintDeleted},
    {"hosts", "list", "List hosts", Arguments::kPaging, "GET", "/api/v1/hosts", "", PrintHosts},
    {"hosts", "show", "Show a host with its locks, shares and waiters", Arguments::kHostName, "GET",
     "/api/v1/hosts/{}", "", PrintHost},
    {"hosts", "release", "Drop every lock, share and waiter of a host", Arguments::kHostName,
     "POST", "/api/v1/hosts/{}/release", "", PrintReleased},
    {"locks", "list", "List locks", Arguments::kStateFilters, "GET", "/api/v1/locks", "",
     PrintLocks},
    {"locks", "waits",
     "Who waits on whom: each blocked request and the locks it waits for, to follow a stuck "
     "chain to its head",
     Arguments::kStateFilters, "GET", "/api/v1/waiters", "", PrintWaits},
    {"shares", "list", "List shares", Arguments::kStateFilters, "GET", "/api/v1/shares", "",
     PrintShares},
    {"waiters", "list", "List waiters", Arguments::kStateFilters, "GET", "/api/v1/waiters", "",
     PrintWaiters},
    {"grace", "show", "Show the grace period", Arguments::kNone, "GET", "/api/v1/grace", "",
     PrintGrace},
    {"grace", "end", "End the grace period now", Arguments::kNone, "POST", "/api/v1/grace/end", "",
     PrintGrace},
    {nullptr, "notify", "Send SM_NOTIFY again to every monitored host, or to HOST",
     Arguments::kNotifyHost, "POST", "/api/v1/notify", "{}", PrintNotify},
    {"service", "release",
     "Hand the service over: this node stops serving, releases the lease and waits as standby",
     Arguments::kNone, "POST", "/api/v1/service/release", "{}", PrintServiceRelease},
};

// Where the commands' options land. One set for all: only the chosen command's are read.
struct CommandValues {
  std::optional<size_t> limit;
  std::optional<size_t> offset;
  std::string mon_name;
  std::string my_name;
  std::string filter_host;
  std::string filter_file;
  std::string positional;  // ID, NAME or HOST.
};

void AddArguments(CLI::App& command, Arguments arguments, CommandValues& values) {
  switch (arguments) {
    case Arguments::kNone:
    case Arguments::kPaging:
      break;
    case Arguments::kClientFilters:
      command.add_option("--mon-name", values.mon_name, "Only those monitoring this host");
      command.add_option("--my-name", values.my_name, "Only those calling back this host");
      break;
    case Arguments::kStateFilters:
      command.add_option("--host", values.filter_host, "Only this host's");
      command.add_option("--file", values.filter_file, "Only this file's (file handle in hex)");
      break;
    case Arguments::kRegistrationId:
      command.add_option("ID", values.positional, "Registration id (from clients list)")
          ->required();
      break;
    case Arguments::kHostName:
      command.add_option("NAME", values.positional, "Host name (from hosts list)")->required();
      break;
    case Arguments::kNotifyHost:
      command.add_option("HOST", values.positional, "Only this monitored host");
      break;
  }
  if (arguments == Arguments::kPaging || arguments == Arguments::kClientFilters ||
      arguments == Arguments::kStateFilters) {
    command.add_option("--limit", values.limit, "At most this many rows (1-1000, default 100)");
    command.add_option("--offset", values.offset, "Skip this many rows");
  }
}

// The request `command` makes with `values` as the command line set them.
Request MakeRequest(const Command& command, const CommandValues& values) {
  Request request;
  request.method = command.method;
  request.path = fmt::format(fmt::runtime(command.path), Encode(values.positional));
  request.body = command.body;
  request.print = command.print;
  QueryString query;
  if (command.arguments == Arguments::kClientFilters) {
    query.Add("mon_name", values.mon_name);
    query.Add("my_name", values.my_name);
  } else if (command.arguments == Arguments::kStateFilters) {
    query.Add("host", values.filter_host);
    query.Add("file", values.filter_file);
  }
  query.Add("limit", values.limit);
  query.Add("offset", values.offset);
  request.path += query.text();
  if (command.arguments == Arguments::kNotifyHost && !values.positional.empty()) {
    request.body = json{{"host", values.positional}}.dump();
  }
  return request;
}

// The commands of kCommands under their groups; the one the command line names sets `request`.
void AddCommands(CLI::App& app, CommandValues& values, Request& request) {
  std::vector<std::pair<std::string_view, CLI::App*>> groups;
  const auto parent = [&](const char* group) {
    if (group == nullptr) return &app;
    for (const auto& [name, added] : groups) {
      if (name == group) return added;
    }
    for (const Group& known : kGroups) {
      if (std::string_view(known.name) == group) {
        CLI::App* added = app.add_subcommand(known.name, known.help);
        added->require_subcommand(1);
        groups.emplace_back(known.name, added);
        return added;
      }
    }
    NLOCKD_ASSERT(false, "every group is in kGroups");
    return &app;
  };
  for (const Command& command : kCommands) {
    CLI::App* added = parent(command.group)->add_subcommand(command.name, command.help);
    AddArguments(*added, command.arguments, values);
    added->callback([&command, &values, &request] { request = MakeRequest(command, values); });
  }
}

// The options of nlockctl itself, accepted before or after the command.
struct GlobalOptions {
  std::string server;
  std::string token;
  std::string token_file;
  bool as_json = false;
  CLI::Option* token_option = nullptr;
};

void AddGlobalOptions(CLI::App& app, GlobalOptions& options) {
  app.set_version_flag("--version",
                       fmt::format("nlockctl {} (revision {}, {} build)", NLOCKD_BUILD_VERSION,
                                   NLOCKD_BUILD_REVISION, NLOCKD_BUILD_TYPE));
  // Options of the app are accepted after a subcommand too ("nlockctl locks list --json").
  app.fallthrough();
  app.add_option("--server", options.server, "Admin API URL (env NLOCKCTL_SERVER)")
      ->capture_default_str();
  options.token_option =
      app.add_option("--token", options.token, "Bearer token (env NLOCKCTL_TOKEN)");
  app.add_option("--token-file", options.token_file,
                 "Read the bearer token from this file, kept out of ps and the environment (env "
                 "NLOCKCTL_TOKEN_FILE; a relative path is looked up in $CREDENTIALS_DIRECTORY)")
      ->excludes(options.token_option);
  app.add_flag("--json", options.as_json, "Print the API's JSON instead of a table");
}

// A message when `server` is not an http(s) URL; trailing slashes are dropped.
std::optional<std::string> CheckServer(std::string& server) {
  if (!server.starts_with("http://") && !server.starts_with("https://")) {
    return fmt::format("--server must be an http:// or https:// URL, not '{}'", server);
  }
  while (server.ends_with('/')) server.pop_back();
  return std::nullopt;
}

// --token wins over everything; then a token file (flag or environment) over NLOCKCTL_TOKEN.
// A message when the token file cannot be read.
std::optional<std::string> SettleToken(GlobalOptions& options, const CliEnvironment& environment) {
  if (options.token_option->count() == 0 && !options.token_file.empty()) {
    std::string error;
    std::optional<std::string> from_file = ReadTokenFile(options.token_file, environment, error);
    if (!from_file) return error;
    options.token = std::move(*from_file);
  }
  return std::nullopt;
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           const CliEnvironment& environment) {
  CLI::App app("nlockctl: inspect and steer a running nlockd through its admin API");
  app.require_subcommand(1);
  GlobalOptions options;
  options.server = environment.server.value_or(kDefaultServer);
  options.token = environment.token.value_or("");
  options.token_file = environment.token_file.value_or("");
  AddGlobalOptions(app, options);
  CommandValues values;
  Request request;
  AddCommands(app, values, request);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error, out, err);
    return code == 0 ? kCliOk : kCliUsage;
  }
  if (std::optional<std::string> error = CheckServer(options.server)) {
    err << "nlockctl: " << *error << '\n';
    return kCliUsage;
  }
  if (request.print == nullptr) {
    err << app.help();
    return kCliUsage;
  }
  if (std::optional<std::string> error = SettleToken(options, environment)) {
    err << "nlockctl: " << *error << '\n';
    return kCliUsage;
  }
  return Execute(options.server, options.token, options.as_json, request, out, err);
}

}  // namespace nlockd::admin

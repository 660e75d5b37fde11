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
  for (const auto& [header, field] : columns) headers.push_back(header);
  std::vector<std::vector<std::string>> rows;
  for (const json& item : answer.at(key)) {
    std::vector<std::string> row;
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

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           const CliEnvironment& environment) {
  CLI::App app("nlockctl: inspect and steer a running nlockd through its admin API");
  app.require_subcommand(1);
  std::string server = environment.server.value_or(kDefaultServer);
  std::string token = environment.token.value_or("");
  bool as_json = false;
  app.set_version_flag("--version",
                       fmt::format("nlockctl {} (revision {}, {} build)", NLOCKD_BUILD_VERSION,
                                   NLOCKD_BUILD_REVISION, NLOCKD_BUILD_TYPE));
  // Options of the app are accepted after a subcommand too ("nlockctl locks list --json").
  app.fallthrough();
  app.add_option("--server", server, "Admin API URL (env NLOCKCTL_SERVER)")->capture_default_str();
  auto* token_option = app.add_option("--token", token, "Bearer token (env NLOCKCTL_TOKEN)");
  std::string token_file = environment.token_file.value_or("");
  auto* token_file_option = app.add_option(
      "--token-file", token_file,
      "Read the bearer token from this file, kept out of ps and the environment (env "
      "NLOCKCTL_TOKEN_FILE; a relative path is looked up in $CREDENTIALS_DIRECTORY)");
  token_file_option->excludes(token_option);
  app.add_flag("--json", as_json, "Print the API's JSON instead of a table");

  Request request;
  std::optional<size_t> limit;
  std::optional<size_t> offset;
  const auto add_paging = [&](CLI::App* command) {
    command->add_option("--limit", limit, "At most this many rows (1-1000, default 100)");
    command->add_option("--offset", offset, "Skip this many rows");
  };

  app.add_subcommand("status", "State number, grace period and counts")->callback([&] {
    request.path = "/api/v1/status";
    request.print = PrintStatus;
  });

  auto* clients = app.add_subcommand("clients", "NSM monitor registrations (SM_MON)");
  clients->require_subcommand(1);
  std::string mon_name;
  std::string my_name;
  auto* clients_list = clients->add_subcommand("list", "List registrations");
  clients_list->add_option("--mon-name", mon_name, "Only those monitoring this host");
  clients_list->add_option("--my-name", my_name, "Only those calling back this host");
  add_paging(clients_list);
  clients_list->callback([&] {
    QueryString query;
    query.Add("mon_name", mon_name);
    query.Add("my_name", my_name);
    query.Add("limit", limit);
    query.Add("offset", offset);
    request.path = "/api/v1/clients" + query.text();
    request.print = PrintClients;
  });
  std::string id;
  clients->add_subcommand("show", "Show one registration")
      ->callback([&] {
        request.path = "/api/v1/clients/" + Encode(id);
        request.print = PrintStatus;
      })
      ->add_option("ID", id, "Registration id (from clients list)")
      ->required();
  clients->add_subcommand("delete", "Delete one registration (as SM_UNMON)")
      ->callback([&] {
        request.method = "DELETE";
        request.path = "/api/v1/clients/" + Encode(id);
        request.print = PrintDeleted;
      })
      ->add_option("ID", id, "Registration id (from clients list)")
      ->required();

  auto* hosts = app.add_subcommand("hosts", "Client hosts known to the lock manager");
  hosts->require_subcommand(1);
  auto* hosts_list = hosts->add_subcommand("list", "List hosts");
  add_paging(hosts_list);
  hosts_list->callback([&] {
    QueryString query;
    query.Add("limit", limit);
    query.Add("offset", offset);
    request.path = "/api/v1/hosts" + query.text();
    request.print = PrintHosts;
  });
  std::string host_name;
  hosts->add_subcommand("show", "Show a host with its locks, shares and waiters")
      ->callback([&] {
        request.path = "/api/v1/hosts/" + Encode(host_name);
        request.print = PrintHost;
      })
      ->add_option("NAME", host_name, "Host name (from hosts list)")
      ->required();
  hosts->add_subcommand("release", "Drop every lock, share and waiter of a host")
      ->callback([&] {
        request.method = "POST";
        request.path = "/api/v1/hosts/" + Encode(host_name) + "/release";
        request.print = PrintReleased;
      })
      ->add_option("NAME", host_name, "Host name (from hosts list)")
      ->required();

  std::string filter_host;
  std::string filter_file;
  const auto add_state_filters = [&](CLI::App* command) {
    command->add_option("--host", filter_host, "Only this host's");
    command->add_option("--file", filter_file, "Only this file's (file handle in hex)");
    add_paging(command);
  };
  const auto state_query = [&] {
    QueryString query;
    query.Add("host", filter_host);
    query.Add("file", filter_file);
    query.Add("limit", limit);
    query.Add("offset", offset);
    return query.text();
  };
  auto* locks = app.add_subcommand("locks", "Byte-range locks held");
  locks->require_subcommand(1);
  auto* locks_list = locks->add_subcommand("list", "List locks");
  add_state_filters(locks_list);
  locks_list->callback([&] {
    request.path = "/api/v1/locks" + state_query();
    request.print = PrintLocks;
  });
  auto* locks_waits =
      locks->add_subcommand("waits",
                            "Who waits on whom: each blocked request and the locks it "
                            "waits for, to follow a stuck chain to its head");
  add_state_filters(locks_waits);
  locks_waits->callback([&] {
    request.path = "/api/v1/waiters" + state_query();
    request.print = PrintWaits;
  });
  auto* shares = app.add_subcommand("shares", "DOS share reservations held (NLM SHARE)");
  shares->require_subcommand(1);
  auto* shares_list = shares->add_subcommand("list", "List shares");
  add_state_filters(shares_list);
  shares_list->callback([&] {
    request.path = "/api/v1/shares" + state_query();
    request.print = PrintShares;
  });
  auto* waiters = app.add_subcommand("waiters", "Blocked lock requests");
  waiters->require_subcommand(1);
  auto* waiters_list = waiters->add_subcommand("list", "List waiters");
  add_state_filters(waiters_list);
  waiters_list->callback([&] {
    request.path = "/api/v1/waiters" + state_query();
    request.print = PrintWaiters;
  });

  auto* grace = app.add_subcommand("grace", "The grace period after a restart");
  grace->require_subcommand(1);
  grace->add_subcommand("show", "Show the grace period")->callback([&] {
    request.path = "/api/v1/grace";
    request.print = PrintGrace;
  });
  grace->add_subcommand("end", "End the grace period now")->callback([&] {
    request.method = "POST";
    request.path = "/api/v1/grace/end";
    request.print = PrintGrace;
  });

  std::string notify_host;
  app.add_subcommand("notify", "Send SM_NOTIFY again to every monitored host, or to HOST")
      ->callback([&] {
        request.method = "POST";
        request.path = "/api/v1/notify";
        request.body = notify_host.empty() ? "{}" : json{{"host", notify_host}}.dump();
        request.print = PrintNotify;
      })
      ->add_option("HOST", notify_host, "Only this monitored host");

  auto* service = app.add_subcommand("service", "The HA service this node serves (ha = true)");
  service->require_subcommand(1);
  service
      ->add_subcommand("release",
                       "Hand the service over: this node stops serving, releases the lease and "
                       "waits as standby")
      ->callback([&] {
        request.method = "POST";
        request.path = "/api/v1/service/release";
        request.body = "{}";
        request.print = PrintServiceRelease;
      });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error, out, err);
    return code == 0 ? kCliOk : kCliUsage;
  }
  if (!server.starts_with("http://") && !server.starts_with("https://")) {
    err << "nlockctl: --server must be an http:// or https:// URL, not '" << server << "'\n";
    return kCliUsage;
  }
  while (server.ends_with('/')) server.pop_back();
  if (request.print == nullptr) {
    err << app.help();
    return kCliUsage;
  }
  // --token wins over everything; then a token file (flag or environment) over NLOCKCTL_TOKEN.
  if (token_option->count() == 0 && !token_file.empty()) {
    std::string error;
    std::optional<std::string> from_file = ReadTokenFile(token_file, environment, error);
    if (!from_file) {
      err << "nlockctl: " << error << '\n';
      return kCliUsage;
    }
    token = std::move(*from_file);
  }
  return Execute(server, token, as_json, request, out, err);
}

}  // namespace nlockd::admin

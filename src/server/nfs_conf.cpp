// SPDX-License-Identifier: Apache-2.0
#include "server/nfs_conf.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include <strings.h>

namespace nlockd::server {
namespace {

// nfs-utils follows includes without a guard; a loop there never ends. Ours stops here.
constexpr int kMaxIncludeDepth = 16;

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view TrimLeft(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  return text;
}

std::string_view TrimRight(std::string_view text) {
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

std::string Where(const std::filesystem::path& origin, int line) {
  return origin.string() + ":" + std::to_string(line);
}

}  // namespace

NfsConf NfsConf::Load(const std::filesystem::path& file, std::vector<std::string>& warnings) {
  NfsConf conf;
  conf.LoadInto(file, "", "", 0, /*optional=*/true, warnings);
  // FILE.d/*.conf after the main file, in version order (strverscmp: 9-b.conf before 10-a.conf).
  std::filesystem::path directory = file;
  directory += ".d";
  std::error_code error;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    std::string name = entry.path().filename().string();
    constexpr std::string_view kSuffix = ".conf";
    if (name.starts_with('.') || name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) {
      continue;
    }
    std::error_code type_error;
    if (entry.is_directory(type_error)) continue;
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return strverscmp(a.c_str(), b.c_str()) < 0;
  });
  for (const std::string& name : names) {
    conf.LoadInto(directory / name, "", "", 0, /*optional=*/false, warnings);
  }
  return conf;
}

NfsConf NfsConf::Parse(std::string_view text, const std::filesystem::path& origin,
                       std::vector<std::string>& warnings) {
  NfsConf conf;
  conf.ParseInto(text, origin, "", "", 0, warnings);
  return conf;
}

void NfsConf::LoadInto(const std::filesystem::path& file, std::string section, std::string arg,
                       int depth, bool optional, std::vector<std::string>& warnings) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (!optional) warnings.push_back(file.string() + ": cannot be read: " + std::strerror(errno));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  ParseInto(text.str(), file, std::move(section), std::move(arg), depth, warnings);
}

void NfsConf::ParseInto(std::string_view text, const std::filesystem::path& origin,
                        std::string section, std::string arg, int depth,
                        std::vector<std::string>& warnings) {
  // "No section yet" and "a malformed header": assignments are ignored until the next header.
  bool in_section = !section.empty();
  int line_number = 0;
  while (!text.empty()) {
    // One logical line: a backslash right before a newline joins the next line (both become
    // spaces, as in nfs-utils, comments included).
    std::string line;
    int first_line = line_number + 1;
    bool terminated = false;
    while (!text.empty()) {
      size_t end = text.find('\n');
      ++line_number;
      if (end == std::string_view::npos) {
        line += text;
        text = {};
        break;
      }
      std::string_view part = text.substr(0, end);
      text.remove_prefix(end + 1);
      if (!part.empty() && part.back() == '\\') {
        line += part.substr(0, part.size() - 1);
        line += "  ";
        continue;
      }
      line += part;
      terminated = true;
      break;
    }
    std::string where = Where(origin, first_line);
    if (!terminated) {
      if (!TrimLeft(line).empty())
        warnings.push_back(where + ": last line has no newline; ignored");
      break;
    }
    std::string_view rest = TrimLeft(line);
    if (rest.empty() || rest.front() == '#' || rest.front() == ';') continue;

    if (rest.front() == '[') {
      size_t close = rest.find(']');
      if (close == std::string_view::npos) {
        warnings.push_back(where + ": section header without ']'; ignored to the next section");
        in_section = false;
        continue;
      }
      std::string_view inside = TrimRight(TrimLeft(rest.substr(1, close - 1)));
      std::string new_arg;
      if (size_t quote = inside.find('"'); quote != std::string_view::npos) {
        std::string_view quoted = inside.substr(quote + 1);
        size_t end_quote = quoted.find('"');
        if (end_quote == std::string_view::npos) {
          // nfs-utils says it ignores what follows, but files it under the plain section: so do we.
          warnings.push_back(where +
                             ": section argument without a closing '\"'; what follows "
                             "counts as the plain section, as in nfs-utils");
          section = Lower(TrimRight(inside.substr(0, quote)));
          arg.clear();
          in_section = !section.empty();
          continue;
        }
        new_arg = std::string(quoted.substr(0, end_quote));
        inside = TrimRight(inside.substr(0, quote));
      }
      section = Lower(inside);
      arg = std::move(new_arg);
      in_section = !section.empty();
      continue;
    }

    size_t equals = rest.find('=');
    if (equals == std::string_view::npos) {
      warnings.push_back(where + ": line is neither a section nor 'tag = value'; ignored");
      continue;
    }
    std::string tag(TrimRight(rest.substr(0, equals)));
    std::string_view value = TrimLeft(rest.substr(equals + 1));
    if (!value.empty() && (value.front() == '"' || value.front() == '\'')) {
      char quote = value.front();
      value.remove_prefix(1);
      value = value.substr(0, value.find(quote));
    } else {
      value = TrimRight(value.substr(0, value.find_first_of("#;")));
    }
    if (!in_section) {
      warnings.push_back(where + ": '" + tag + "' outside any section; ignored");
      continue;
    }
    if (value.empty()) continue;  // nfs-utils assigns nothing (an earlier value stays)
    if (SameName(tag, "include")) {
      if (depth + 1 > kMaxIncludeDepth) {
        warnings.push_back(where + ": includes nested deeper than " +
                           std::to_string(kMaxIncludeDepth) + "; ignored");
        continue;
      }
      bool optional = value.front() == '-';
      if (optional) value.remove_prefix(1);
      std::filesystem::path included(value);
      if (included.is_relative()) included = origin.parent_path() / included;
      // The included file starts in this section and may change it; this file goes on in its own.
      LoadInto(included, section, arg, depth + 1, optional, warnings);
      continue;
    }
    Set(section, arg, std::move(tag), Value{std::string(value), where});
  }
}

void NfsConf::Set(std::string section, std::string arg, std::string tag, Value value) {
  // The later assignment wins. As in nfs-utils, the earlier one is removed by section and tag
  // alone, whatever its argument.
  std::erase_if(bindings_, [&](const Binding& binding) {
    return binding.section == section && SameName(binding.tag, tag);
  });
  bindings_.push_back(
      Binding{std::move(section), std::move(arg), std::move(tag), std::move(value)});
}

std::optional<NfsConf::Value> NfsConf::Get(std::string_view section, std::string_view tag) const {
  return Get(section, "", tag);
}

std::optional<NfsConf::Value> NfsConf::Get(std::string_view section, std::string_view arg,
                                           std::string_view tag) const {
  for (const Binding& binding : bindings_) {
    if (SameName(binding.section, section) && SameName(binding.arg, arg) &&
        SameName(binding.tag, tag)) {
      return Resolve(binding);
    }
  }
  return std::nullopt;
}

std::optional<NfsConf::Value> NfsConf::Resolve(const Binding& binding) const {
  if (!binding.value.text.starts_with('$')) return binding.value;
  // `$NAME`: the environment first, then the [environment] section; unset if neither has it.
  std::string name = binding.value.text.substr(1);
  std::optional<std::string> from_environment;
  if (environment_) {
    from_environment = environment_(name);
  } else if (const char* text = std::getenv(name.c_str())) {
    from_environment = text;
  }
  if (from_environment && !from_environment->empty()) {
    return Value{*from_environment, binding.value.origin + " ($" + name + ")"};
  }
  if (SameName(binding.section, "environment")) return std::nullopt;  // no self-reference
  return Get("environment", name);
}

std::optional<bool> NfsConf::GetBool(std::string_view section, std::string_view tag) const {
  std::optional<Value> value = Get(section, tag);
  if (!value) return std::nullopt;
  for (std::string_view yes : {"1", "t", "true", "y", "yes", "on"}) {
    if (SameName(value->text, yes)) return true;
  }
  for (std::string_view no : {"0", "f", "false", "n", "no", "off"}) {
    if (SameName(value->text, no)) return false;
  }
  return std::nullopt;
}

}  // namespace nlockd::server

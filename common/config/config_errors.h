// The problems found while reading one configuration (file, environment, --set), collected so
// that all of them are reported at once, and the keys that could not be read, so that rules
// between keys are not checked on values that were never read.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gradgate::config {

class ConfigErrors {
 public:
  /// Records "<origin>: <key_path>: <message>". `key_path` may index a list ("job.nodes[1]");
  /// its key ("job.nodes") counts as not read.
  void add(std::string_view origin, std::string_view key_path, std::string_view message);
  /// Records "<origin>: <message>" for a problem tied to no key (a --set text without '=').
  void add_general(std::string_view origin, std::string_view message);
  /// Records "<origin>: <message>" for a problem that kept the whole text from being read (a
  /// YAML syntax error): every key counts as not read.
  void add_unreadable(std::string_view origin, std::string_view message);
  /// Whether a problem was recorded for `key` ("section.key").
  bool failed(std::string_view key) const;
  bool empty() const { return lines_.empty(); }
  /// One problem per line, in the order found.
  std::string joined() const;

 private:
  void add_line(std::string line);

  std::vector<std::string> lines_;
  std::set<std::string, std::less<>> failed_keys_;
  bool nothing_read_ = false;
};

}  // namespace gradgate::config

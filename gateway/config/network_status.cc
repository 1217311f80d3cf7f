#include "gateway/config/network_status.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/net/endpoint.h"

namespace gradgate::gateway {
namespace {

constexpr std::string_view kAnnotation = "k8s.v1.cni.cncf.io/network-status";

// One entry of the network-status list.
struct NetworkAttachment {
  std::string name;         // "namespace/network", or the default network's name
  std::string interface;    // the interface name in the pod ("net1"); may be empty
  std::string ipv4;         // its first IPv4 address; empty when it has none
  std::string pci_address;  // device-info.pci.pci-address ("0000:3b:02.1"); empty when none
};

Status malformed(const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "network-status: " + what);
}

std::optional<uint32_t> hex_value(std::string_view digits) {
  uint32_t value = 0;
  for (const char c : digits) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<uint32_t>(digit);
  }
  return value;
}

void append_utf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// The text of a string quoted as Go's %q writes it: "..." with \n, \", \\, \xHH, \uHHHH,
// \UHHHHHHHH, octal \ooo and the other one-letter escapes.
Result<std::string> unquote_go(std::string_view quoted) {
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') {
    return malformed("the annotation's value is not a quoted string");
  }
  const std::string_view body = quoted.substr(1, quoted.size() - 2);
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      out += body[i];
      continue;
    }
    if (++i == body.size()) return malformed("the annotation's value ends inside an escape");
    const char letter = body[i];
    const auto digits = [&](std::size_t count) -> std::optional<std::string_view> {
      if (i + count >= body.size()) return std::nullopt;
      const std::string_view found = body.substr(i + 1, count);
      i += count;
      return found;
    };
    switch (letter) {
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case '\\':
      case '"':
      case '\'':
        out += letter;
        break;
      case 'x':
      case 'u':
      case 'U': {
        const auto hex = digits(letter == 'x' ? 2 : letter == 'u' ? 4 : 8);
        const auto value = hex ? hex_value(*hex) : std::nullopt;
        if (!value || *value > 0x10FFFF) {
          return malformed("a bad \\" + std::string(1, letter) +
                           " escape in the annotation's value");
        }
        if (letter == 'x') {
          out += static_cast<char>(*value);
        } else {
          append_utf8(out, *value);
        }
        break;
      }
      default: {
        if (letter < '0' || letter > '7' || i + 2 >= body.size()) {
          return malformed("an unknown escape \\" + std::string(1, letter) +
                           " in the annotation's value");
        }
        uint32_t value = 0;
        for (std::size_t j = i; j < i + 3; ++j) {
          if (body[j] < '0' || body[j] > '7') return malformed("a bad octal escape");
          value = value * 8 + static_cast<uint32_t>(body[j] - '0');
        }
        i += 2;
        out += static_cast<char>(value);
      }
    }
  }
  return out;
}

// The network-status JSON of a downward API annotations file.
Result<std::string> annotation_value(std::string_view file) {
  std::size_t at = 0;
  while (at < file.size()) {
    std::size_t end = file.find('\n', at);
    if (end == std::string_view::npos) end = file.size();
    const std::string_view line = file.substr(at, end - at);
    at = end + 1;
    if (line.size() > kAnnotation.size() && line.starts_with(kAnnotation) &&
        line[kAnnotation.size()] == '=') {
      return unquote_go(line.substr(kAnnotation.size() + 1));
    }
  }
  return Status(ErrorCode::kNotFound, "no " + std::string(kAnnotation) + " annotation");
}

Result<NetworkAttachment> attachment_of(const nlohmann::json& entry, std::size_t index) {
  const std::string where = "entry " + std::to_string(index);
  if (!entry.is_object()) return malformed(where + " is not an object");
  NetworkAttachment attachment;
  const auto name = entry.find("name");
  if (name == entry.end() || !name->is_string()) return malformed(where + " has no \"name\"");
  attachment.name = name->get<std::string>();
  if (const auto interface = entry.find("interface"); interface != entry.end()) {
    if (!interface->is_string()) return malformed(where + ": \"interface\" is not a string");
    attachment.interface = interface->get<std::string>();
  }
  if (const auto ips = entry.find("ips"); ips != entry.end()) {
    if (!ips->is_array()) return malformed(where + ": \"ips\" is not a list");
    for (const auto& ip : *ips) {
      if (!ip.is_string()) return malformed(where + ": an entry of \"ips\" is not a string");
      if (attachment.ipv4.empty() && net::is_ipv4_address(ip.get<std::string>())) {
        attachment.ipv4 = ip.get<std::string>();
      }
    }
  }
  const nlohmann::json::json_pointer pci("/device-info/pci/pci-address");
  if (entry.contains(pci)) {
    if (!entry.at(pci).is_string()) {
      return malformed(where + ": \"device-info.pci.pci-address\" is not a string");
    }
    attachment.pci_address = entry.at(pci).get<std::string>();
  }
  return attachment;
}

Result<std::vector<NetworkAttachment>> parse_network_status(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  std::string json_text;
  if (first != std::string_view::npos && text[first] == '[') {
    json_text = text;
  } else {
    auto value = annotation_value(text);
    if (!value.ok()) return value.status();
    json_text = std::move(value).value();
  }
  const auto list = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded()) return malformed("not valid JSON");
  if (!list.is_array()) return malformed("not a list");
  std::vector<NetworkAttachment> attached;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto attachment = attachment_of(list[i], i);
    if (!attachment.ok()) return attachment.status();
    attached.push_back(std::move(attachment).value());
  }
  return attached;
}

Result<NetworkAttachment> find_network_attachment(const std::vector<NetworkAttachment>& attached,
                                                  std::string_view network) {
  const bool qualified = network.find('/') != std::string_view::npos;
  const NetworkAttachment* found = nullptr;
  for (const auto& attachment : attached) {
    const std::string_view name = attachment.name;
    const std::size_t slash = name.find('/');
    const bool matches = name == network || (!qualified && slash != std::string_view::npos &&
                                             name.substr(slash + 1) == network);
    // The same network attached twice (two interfaces): the first, as Multus attached it.
    if (!matches || (found != nullptr && found->name == attachment.name)) continue;
    if (found != nullptr) {
      return Status(ErrorCode::kInvalidArgument, "network-status lists \"" + found->name +
                                                     "\" and \"" + attachment.name +
                                                     "\": give dpdk.network as namespace/name");
    }
    found = &attachment;
  }
  if (found == nullptr) {
    return Status(ErrorCode::kNotFound,
                  "network-status does not list the network \"" + std::string(network) + "\"");
  }
  return *found;
}

Result<std::string> dpdk_port_of(const NetworkAttachment& attachment) {
  if (!attachment.pci_address.empty()) return attachment.pci_address;
  if (!attachment.interface.empty()) return "net_af_packet0,iface=" + attachment.interface;
  return Status(ErrorCode::kInvalidArgument, "network-status entry \"" + attachment.name +
                                                 "\" names neither a PCI device nor an interface");
}

}  // namespace

Result<DpdkAttachment> find_dpdk_attachment(std::string_view text, std::string_view network) {
  auto attached = parse_network_status(text);
  if (!attached.ok()) return attached.status();
  auto found = find_network_attachment(*attached, network);
  if (!found.ok()) return found.status();
  if (found->ipv4.empty()) {
    return Status(ErrorCode::kInvalidArgument,
                  "network-status entry \"" + found->name +
                      "\" has no IPv4 address: the network needs IPAM that gives one");
  }
  auto port = dpdk_port_of(*found);
  if (!port.ok()) return port.status();
  return DpdkAttachment{found->name, found->ipv4, *std::move(port)};
}

}  // namespace gradgate::gateway

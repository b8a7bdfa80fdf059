#pragma once
/// \file A small XML document model for AWS responses, independent of namespaces: element names are
/// local names ("ec2:item" and "item" are the same), xmlns attributes are ignored, so responses
/// stamped with any API version's namespace read the same.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sky/errors.hpp"

namespace sky::detail::aws {

/// A response body that is not well-formed XML, or not the document that was expected.
class XmlError : public sky::Error {
public:
    using sky::Error::Error;
};

struct XmlElement {
    std::string name;  ///< local name, prefix removed
    std::string text;  ///< character data directly inside (raw, not trimmed)
    std::vector<std::pair<std::string, std::string>> attributes;  ///< xmlns ones left out
    std::vector<XmlElement> children;

    /// First child with this local name, or nullptr.
    [[nodiscard]] const XmlElement* child(std::string_view local_name) const;
    /// Text of the first child with this name, or fallback.
    [[nodiscard]] std::string child_text(std::string_view local_name,
                                         std::string fallback = {}) const;
};

/// Parses a document and returns its root element. Throws XmlError.
[[nodiscard]] XmlElement parse_xml(std::string_view document);

/// Schema-less conversion for callers without a model: an element whose children are all `<item>`
/// (EC2's list encoding) becomes an array, an element with children an object keyed by local name
/// (a repeated name becomes an array), a leaf its text; an empty leaf whose name ends in "Set"
/// (EC2's list naming) becomes an empty array.
[[nodiscard]] nlohmann::json xml_to_json(const XmlElement& element);

/// A list in xml_to_json's output: the array under `key`, or an empty one when it is absent.
[[nodiscard]] const nlohmann::json& list_of(const nlohmann::json& j, const char* key);
/// A string field of xml_to_json's output, or "" when it is absent.
[[nodiscard]] std::string str_of(const nlohmann::json& j, const char* key);

/// Escapes text for use in XML character data or attribute values.
[[nodiscard]] std::string xml_escape(std::string_view text);

}  // namespace sky::detail::aws

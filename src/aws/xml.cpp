#include "aws/xml.hpp"

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <sstream>

namespace sky::detail::aws {

namespace {

namespace pt = boost::property_tree;

std::string local_name(const std::string& name) {
    auto colon = name.find(':');
    return colon == std::string::npos ? name : name.substr(colon + 1);
}

XmlElement convert(const std::string& name, const pt::ptree& node) {
    XmlElement element;
    element.name = local_name(name);
    element.text = node.data();
    for (const auto& [key, child] : node) {
        if (key == "<xmlattr>") {
            for (const auto& [attr, value] : child) {
                if (attr == "xmlns" || attr.rfind("xmlns:", 0) == 0) continue;
                element.attributes.emplace_back(local_name(attr), value.data());
            }
        } else if (key == "<xmlcomment>") {
            continue;
        } else {
            element.children.push_back(convert(key, child));
        }
    }
    return element;
}

// Deeper nesting than any AWS response has (EC2's is about ten).
constexpr std::size_t kMaxDepth = 100;

// Throws XmlError when elements nest deeper than kMaxDepth. Boost's parser and the conversions
// here recurse once per level, so a small hostile body ("<a><a><a>...", 90 KB for 30,000 levels)
// would otherwise overflow the stack. Tokenizes as rapidxml does: comments, CDATA, processing
// instructions and declarations open nothing, quoted attribute values may hold '>' and "/>".
void check_depth(std::string_view doc) {
    std::size_t depth = 0;
    const auto skip_past = [&](std::size_t from, std::string_view end) {
        const std::size_t at = doc.find(end, from);
        return at == std::string_view::npos ? doc.size() : at + end.size();
    };
    for (std::size_t i = doc.find('<'); i < doc.size(); i = doc.find('<', i)) {
        const std::string_view rest = doc.substr(i);
        if (rest.starts_with("<!--")) {
            i = skip_past(i + 4, "-->");
        } else if (rest.starts_with("<![CDATA[")) {
            i = skip_past(i + 9, "]]>");
        } else if (rest.starts_with("<?")) {
            i = skip_past(i + 2, "?>");
        } else if (rest.starts_with("<!") || rest.starts_with("</")) {
            if (rest[1] == '/' && depth > 0) --depth;
            i = skip_past(i + 2, ">");
        } else {
            std::size_t j = i + 1;
            char quote = 0;
            for (; j < doc.size(); ++j) {
                const char c = doc[j];
                if (quote) {
                    if (c == quote) quote = 0;
                } else if (c == '"' || c == '\'') {
                    quote = c;
                } else if (c == '>') {
                    break;
                }
            }
            if (j >= doc.size() || doc[j - 1] != '/') {
                if (++depth > kMaxDepth)
                    throw XmlError("XML elements nested more than " + std::to_string(kMaxDepth) +
                                   " deep");
            }
            i = j;
        }
    }
}

}  // namespace

const XmlElement* XmlElement::child(std::string_view local) const {
    for (const auto& c : children) {
        if (c.name == local) return &c;
    }
    return nullptr;
}

std::string XmlElement::child_text(std::string_view local, std::string fallback) const {
    const XmlElement* c = child(local);
    return c ? c->text : std::move(fallback);
}

XmlElement parse_xml(std::string_view document) {
    check_depth(document);
    std::istringstream in{std::string(document)};
    pt::ptree tree;
    try {
        // No whitespace trimming: string values keep their spaces exactly.
        pt::read_xml(in, tree, 0);
    } catch (const pt::xml_parser_error& e) {
        throw XmlError(std::string("malformed XML: ") + e.message() + " at line " +
                       std::to_string(e.line()));
    }
    for (const auto& [key, child] : tree) {
        if (key == "<xmlcomment>") continue;
        return convert(key, child);
    }
    throw XmlError("XML document has no root element");
}

nlohmann::json xml_to_json(const XmlElement& element) {
    if (element.children.empty()) {
        if (element.text.empty() && element.name.size() > 3 &&
            element.name.compare(element.name.size() - 3, 3, "Set") == 0) {
            return nlohmann::json::array();
        }
        return element.text;
    }
    bool all_items = std::all_of(element.children.begin(), element.children.end(),
                                 [](const XmlElement& c) { return c.name == "item"; });
    if (all_items) {
        nlohmann::json array = nlohmann::json::array();
        for (const auto& c : element.children) array.push_back(xml_to_json(c));
        return array;
    }
    nlohmann::json object = nlohmann::json::object();
    for (const auto& c : element.children) {
        auto value = xml_to_json(c);
        if (!object.contains(c.name)) {
            object[c.name] = std::move(value);
        } else {
            auto& existing = object[c.name];
            if (!existing.is_array()) existing = nlohmann::json::array({existing});
            existing.push_back(std::move(value));
        }
    }
    return object;
}

std::string xml_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&apos;";
                break;
            default:
                out.push_back(c);
        }
    }
    return out;
}

const nlohmann::json& list_of(const nlohmann::json& j, const char* key) {
    // Never destroyed: a signal's teardown may still list what is left while exit() runs.
    static const auto* empty = new nlohmann::json(nlohmann::json::array());
    if (!j.is_object() || !j.contains(key) || !j[key].is_array()) return *empty;
    return j[key];
}

std::string str_of(const nlohmann::json& j, const char* key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return {};
    return j[key].get<std::string>();
}

}  // namespace sky::detail::aws

// The XML parser AWS responses go through: any bytes give an XmlElement or an XmlError (a
// sky::Error), and what parses converts to JSON. Text escaped with xml_escape parses back to
// itself.
#include <cstdint>
#include <string>

#include "aws/xml.hpp"
#include "fuzz/fuzz_common.hpp"

using namespace sky::detail::aws;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view doc = sky::fuzz::text(data, size);
    sky::fuzz::expect_typed([&] {
        const XmlElement root = parse_xml(doc);
        const nlohmann::json j = xml_to_json(root);
        (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        (void)root.child_text("item", "none");
        (void)list_of(j, "item");
        (void)str_of(j, "item");
    });
    // Escaping: character data without NUL or CR (which XML itself does not keep) reads back.
    if (doc.find('\0') == std::string_view::npos && doc.find('\r') == std::string_view::npos) {
        const std::string wrapped = "<v>" + xml_escape(doc) + "</v>";
        XmlElement back;
        sky::fuzz::expect_typed([&] { back = parse_xml(wrapped); });
        sky::fuzz::check(back.name == "v" && back.text == doc && back.children.empty(),
                         "xml_escape'd text does not parse back to itself: " + wrapped);
    }
    return 0;
}

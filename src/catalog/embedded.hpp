#pragma once
// The catalog CSVs compiled into the library (see src/catalog/CMakeLists.txt).

namespace sky::detail {

/// One embedded CSV: the provider it describes and its text.
struct EmbeddedCsv {
    const char* provider;  ///< file name without ".csv", e.g. "aws"; nullptr ends the list
    const char* text;
};

/// Every embedded CSV, terminated by an entry whose provider is nullptr.
const EmbeddedCsv* embedded_catalog_csvs();

}  // namespace sky::detail

#pragma once
// Strict JSON (RFC 8259), judged apart from what a reader makes of the values: a file named
// .json is JSON, so what YAML would also take there (comments, unquoted words, leading
// zeros, text after the closing brace) is an error, located.
#include <optional>
#include <string>
#include <string_view>

namespace memsim {

/// Whether `source`, a file's name, says the file is JSON (".json", ".json.gz").
bool names_json_file(std::string_view source);

/// Why `text` is not strict JSON, located: "source:3:14: malformed JSON: ..." ("truncated
/// JSON" when it ends too soon); nullopt when it is JSON.
std::optional<std::string> json_syntax_error(std::string_view text, const std::string& source);

}  // namespace memsim

// A nesting-depth guard for JSON and YAML text, run before any parser sees the text.
//
// nlohmann::json and yaml-cpp build their trees recursively, and so do the walks and
// re-serialisations that follow (dump(), comparisons, our own decoders): a request body of a
// million '[' overflows the stack and takes the controller down. CheckNestingDepth is one
// iterative pass over the text, O(n) time and O(max_depth) memory, that refuses text nested
// deeper than `max_depth` and says where the limit was crossed.
//
// What counts as a level:
//   kJson  every '[' and '{' outside a string ("..." with backslash escapes).
//   kYaml  what yaml-cpp's parser recurses on: every flow collection ('[' or '{' where yaml-cpp
//          reads one, not inside a quoted, plain or block scalar or a comment); every block
//          collection, which YAML opens by indentation (a key or a "- " entry further right
//          than the collection around it); and every one-pair mapping yaml-cpp builds around a
//          ':' that stands where a node belongs ("[a: b]", "{a: : b}"). The pass follows
//          yaml-cpp's tokenizer (simple keys, indentation stack, where scalars end) without
//          building anything, so its count is the nesting yaml-cpp builds, or in rare forms
//          (such as "[? a : b]") one more; a mapping counts once the ':' after its first key
//          confirms it. (yaml-cpp 0.7 itself refuses some hundreds of levels, with a bare
//          "bad file"; older releases have no limit.) A NUL byte anywhere, or a UTF-16/32 byte
//          order mark, is refused too: yaml-cpp would decode such text into other characters
//          than the ones counted (and YAML text cannot hold a NUL).
//
// Thread-safety: a pure function.
#pragma once

#include <string_view>

#include "common/status.h"

namespace gpufleet {

enum class NestingSyntax { kJson, kYaml };

// The deepest legitimate input, a job file, nests about 5 levels (a job, its checkpoint or
// restart mapping, a list inside it; an array's axes); cluster and pool files about 6. 64
// leaves room for any hand-written file while keeping recursion thousands of frames away
// from a stack limit.
inline constexpr int kMaxNestingDepth = 64;

// Ok, or InvalidArgument "nesting deeper than 64 levels at line 1, column 65" (1-based, columns
// in bytes) naming the bracket, dash or key that opens level max_depth + 1; for kYaml also
// InvalidArgument for a NUL byte or a UTF-16/32 byte order mark. Callers prefix their source:
// "job.yaml: nesting deeper than ...".
Status CheckNestingDepth(std::string_view text, NestingSyntax syntax, int max_depth = kMaxNestingDepth);

}  // namespace gpufleet

#pragma once
// The memsim command line: run, info, validate, trace, list. Exit codes: 0 success (an oom
// result is a success of the simulator), 1 bad input, 2 usage.
namespace memsim {

int cli_main(int argc, char** argv);

}  // namespace memsim

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "sim/app/cli.h"

int main(int argc, char** argv) {
  const int code = memsim::cli_main(argc, argv);
  // Everything is written and committed by now: the process ends here, without running the
  // libraries' static destructors (SimGrid's and ns-3's registries take milliseconds to tear
  // down, for nothing).
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

#include "sim/app/cli.h"

int main(int argc, char** argv) { return memsim::cli_main(argc, argv); }

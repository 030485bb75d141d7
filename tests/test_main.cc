// Catch2 v2 main (Debian's Catch2WithMain is not usable for cross builds, so we provide our own).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#----------------------------------------------------------------
# Generated CMake target import file for configuration "Release".
#----------------------------------------------------------------

# Commands may need to know the format version.
set(CMAKE_IMPORT_FILE_VERSION 1)

# Import target "Kestrel::kestrel" for configuration "Release"
set_property(TARGET Kestrel::kestrel APPEND PROPERTY IMPORTED_CONFIGURATIONS RELEASE)
set_target_properties(Kestrel::kestrel PROPERTIES
  IMPORTED_LINK_DEPENDENT_LIBRARIES_RELEASE "absl::status;absl::statusor;absl::strings;absl::synchronization;fmt::fmt"
  IMPORTED_LOCATION_RELEASE "${_IMPORT_PREFIX}/lib/libkestrel.so.0.1.0"
  IMPORTED_SONAME_RELEASE "libkestrel.so.0"
  )

list(APPEND _cmake_import_check_targets Kestrel::kestrel )
list(APPEND _cmake_import_check_files_for_Kestrel::kestrel "${_IMPORT_PREFIX}/lib/libkestrel.so.0.1.0" )

# Import target "Kestrel::kestrel_static" for configuration "Release"
set_property(TARGET Kestrel::kestrel_static APPEND PROPERTY IMPORTED_CONFIGURATIONS RELEASE)
set_target_properties(Kestrel::kestrel_static PROPERTIES
  IMPORTED_LINK_INTERFACE_LANGUAGES_RELEASE "CXX"
  IMPORTED_LOCATION_RELEASE "${_IMPORT_PREFIX}/lib/libkestrel.a"
  )

list(APPEND _cmake_import_check_targets Kestrel::kestrel_static )
list(APPEND _cmake_import_check_files_for_Kestrel::kestrel_static "${_IMPORT_PREFIX}/lib/libkestrel.a" )

# Commands beyond this point should not need to know the version.
set(CMAKE_IMPORT_FILE_VERSION)

# SPDX-License-Identifier: Apache-2.0
# `cmake --install`: libnlockd (shared and static), its public headers, the CMake package
# (nlockdConfig.cmake, its version file, targets nlockd::nlockd and nlockd::nlockd_static),
# nlockd.pc, the binaries, the systemd unit, the example config and the docs.
include(CMakePackageConfigHelpers)

set(NLOCKD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/nlockd)

install(TARGETS nlockd_shared nlockd_static EXPORT nlockdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nlockd ${PROJECT_BINARY_DIR}/include/nlockd
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(EXPORT nlockdTargets NAMESPACE nlockd:: DESTINATION ${NLOCKD_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nlockdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/nlockdConfig.cmake INSTALL_DESTINATION ${NLOCKD_CMAKE_DIR})
# Same major version: compatible (docs/embedding.md, "ABI and versions").
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nlockdConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nlockdConfig.cmake ${PROJECT_BINARY_DIR}/nlockdConfigVersion.cmake
  DESTINATION ${NLOCKD_CMAKE_DIR})

file(RELATIVE_PATH NLOCKD_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/nlockd.pc.in ${PROJECT_BINARY_DIR}/nlockd.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/nlockd.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS nlockd DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS nlockd_admin_http LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/nlockd)
install(TARGETS nlockctl DESTINATION ${CMAKE_INSTALL_BINDIR})

# The systemd unit, naming the daemon by its installed path. By default under the prefix,
# <prefix>/lib/systemd/system: systemd reads units there for the /usr and /usr/local prefixes
# (GNUInstallDirs has no directory for units, and its LIBDIR may be a multiarch one such as
# lib/x86_64-linux-gnu, where systemd does not look). A packager may name another directory:
# relative to the prefix, or absolute, such as systemd's own
# `pkg-config --variable=systemdsystemunitdir systemd` (still below DESTDIR). Debian's
# packaging installs the unit with dh_installsystemd instead (debian/not-installed).
set(NLOCKD_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
  "Where the systemd unit is installed: relative to CMAKE_INSTALL_PREFIX, or absolute")
file(READ ${PROJECT_SOURCE_DIR}/packaging/nlockd.service unit)
string(REPLACE "/usr/sbin/nlockd" "${CMAKE_INSTALL_FULL_SBINDIR}/nlockd" unit "${unit}")
file(WRITE ${PROJECT_BINARY_DIR}/packaging/nlockd.service "${unit}")
install(FILES ${PROJECT_BINARY_DIR}/packaging/nlockd.service
  DESTINATION ${NLOCKD_SYSTEMD_UNIT_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/config/nlockd.toml
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/nlockd/examples)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/operator-guide.md
  ${PROJECT_SOURCE_DIR}/docs/api.md ${PROJECT_SOURCE_DIR}/docs/embedding.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

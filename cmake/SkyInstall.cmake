include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS sky sky_cli EXPORT skyTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/sky DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT skyTargets NAMESPACE sky:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sky)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/skyConfig.cmake.in
  ${PROJECT_BINARY_DIR}/skyConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sky)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/skyConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/skyConfig.cmake ${PROJECT_BINARY_DIR}/skyConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sky)

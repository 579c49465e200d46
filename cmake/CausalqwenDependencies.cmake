# The dependencies of the causalqwen INTERFACE target, all from Debian packages
# (cmake/install-deps.sh installs them). Shared by the build and by the installed
# package config, so a consumer finds exactly what the library was built against.
include(CMakeFindDependencyMacro)
find_dependency(Eigen3 3.4 REQUIRED NO_MODULE)
find_dependency(xtl REQUIRED)
find_dependency(xsimd REQUIRED)
find_dependency(xtensor REQUIRED)
find_dependency(fmt REQUIRED)
find_dependency(nlohmann_json 3.10 REQUIRED)
find_dependency(OpenMP REQUIRED COMPONENTS CXX)

#include <causalqwen/cauchy.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the sentence below.
void use(const cq::CauchyTensor<double>& U) { auto y = tanh(U); (void)y; }

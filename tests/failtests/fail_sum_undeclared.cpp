#include <causalqwen/cauchy.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the sentence below.
void use(const cq::CauchyTensor<double>& U, const cq::CauchyTensor<double>& V) { auto y = U + V; (void)y; }

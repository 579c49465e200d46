#include <causalqwen/cauchy.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the sentence below.
void use(const cq::CauchyTensor<float, 2>& U, const cq::CauchyTensor<float, 2>& V) { auto y = U * V; (void)y; }

// Kernels of zkpipe-stream: a kernel that keeps SMs busy for a given number of cycles, used to
// check that copies overlap kernels.

// Spins for about `cycles` clock cycles in every thread; thread 0 of block 0 writes a marker.
extern "C" __global__ void spin(unsigned long long cycles, unsigned int* sink) {
  unsigned long long start = clock64();
  while (clock64() - start < cycles) { }
  if (threadIdx.x == 0 && blockIdx.x == 0) sink[0] = 1;
}

// Session 25: which Zen 4 pipes the node step's operations share (BENCHMARKS.md,
// "CPU rays, session 25"). 12 independent chains per operation, 256-bit.
//   gcc -O2 -mavx2 -mfma -mavx512f -mavx512vl -o pipes pipes.c && ./pipes
// ns per operation; at ~3.6 GHz, 0.139 ns is 2 a cycle, 0.069 ns 4 a cycle.
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 200000000L
#define BODY(OP) { __m256 a0=_mm256_set1_ps(1.0f),a1=a0,a2=a0,a3=a0,a4=a0,a5=a0,a6=a0,a7=a0,a8=a0,a9=a0,a10=a0,a11=a0; __m256 b=_mm256_set1_ps(0.999f),c=_mm256_set1_ps(0.001f); \
 double t0=now(); for(long i=0;i<N/12;i++){ OP(a0);OP(a1);OP(a2);OP(a3);OP(a4);OP(a5);OP(a6);OP(a7);OP(a8);OP(a9);OP(a10);OP(a11); __asm__ volatile("" : "+x"(a0),"+x"(a1),"+x"(a2),"+x"(a3),"+x"(a4),"+x"(a5),"+x"(a6),"+x"(a7),"+x"(a8),"+x"(a9),"+x"(a10),"+x"(a11)); } \
 double t=now()-t0; float s[8]; _mm256_storeu_ps(s,_mm256_add_ps(a0,a11)); printf("%-10s %.3f ns/op (%g)\n", #OP, t/N*1e9, s[0]); }
#define FMA(x) x=_mm256_fmadd_ps(x,b,c)
#define MAX(x) x=_mm256_max_ps(x,b)
#define MIN(x) x=_mm256_min_ps(x,b)
#define ADD(x) x=_mm256_add_ps(x,c)
#define MUL(x) x=_mm256_mul_ps(x,b)
#define IMAX(x) x=_mm256_castsi256_ps(_mm256_max_epi32(_mm256_castps_si256(x),_mm256_castps_si256(b)))
#define OR(x) x=_mm256_or_ps(x,b)
#define CMP(x) {__mmask8 k=_mm256_cmp_ps_mask(x,b,_CMP_LE_OQ); x=_mm256_mask_mov_ps(x,k,c);}
#define FMAMAX(x) {x=_mm256_fmadd_ps(x,b,c); x=_mm256_max_ps(x,c);}
#define FMAADD(x) {x=_mm256_fmadd_ps(x,b,c); x=_mm256_add_ps(x,c);}
#define MAXADD(x) {x=_mm256_max_ps(x,b); x=_mm256_add_ps(x,c);}
#define MAXIMAX(x) {x=_mm256_max_ps(x,b); x=_mm256_castsi256_ps(_mm256_max_epi32(_mm256_castps_si256(x),_mm256_castps_si256(b)));}
int main(){ BODY(FMA) BODY(MAX) BODY(MIN) BODY(ADD) BODY(MUL) BODY(IMAX) BODY(OR) BODY(FMAMAX) BODY(FMAADD) BODY(MAXADD) BODY(MAXIMAX) return 0;}

// emulation_io.h: what every program that runs kernels through the CPU
// emulator shares: its command line (`NAME INPUT OUTPUT`) and reading and
// writing whole arrays of the records the Rust test exchanges with it.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <vector>

struct EmulationFiles {
    FILE* in;
    FILE* out;
};

// The input and output files of `name INPUT OUTPUT`; exits with status 2
// on another command line or a file that does not open.
inline EmulationFiles open_files(int argc, char** argv, const char* name) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s INPUT OUTPUT\n", name);
        exit(2);
    }
    EmulationFiles files = {fopen(argv[1], "rb"), fopen(argv[2], "wb")};
    if (!files.in || !files.out) {
        fprintf(stderr, "cannot open the files\n");
        exit(2);
    }
    return files;
}

// n records of T, or exit with status 2 when the input holds fewer.
template <class T>
std::vector<T> read_array(FILE* in, size_t n) {
    std::vector<T> v(n);
    if (n > 0 && fread((void*)v.data(), sizeof(T), n, in) != n) {
        fprintf(stderr, "short input\n");
        exit(2);
    }
    return v;
}

template <class T>
void write_array(FILE* out, const std::vector<T>& v) {
    if (!v.empty()) fwrite((const void*)v.data(), sizeof(T), v.size(), out);
}

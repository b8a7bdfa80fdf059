// A library of incompressible bytes that the benchmark's program really calls: its size is what
// a training program's closure weighs (libtorch alone is about 490 MB).
#include <cstdint>

#define SKY_STR2(x) #x
asm(".section .rodata\n"
    ".balign 64\n"
    ".hidden sky_ship_blob_begin\n"
    ".globl sky_ship_blob_begin\n"
    "sky_ship_blob_begin:\n"
    ".incbin \"" SHIP_BLOB_FILE
    "\"\n"
    ".hidden sky_ship_blob_end\n"
    ".globl sky_ship_blob_end\n"
    "sky_ship_blob_end:\n"
    ".previous\n");

extern "C" const unsigned char sky_ship_blob_begin[];
extern "C" const unsigned char sky_ship_blob_end[];

/// A checksum over one byte of every page, and the size: reaches every part of the library.
extern "C" std::uint64_t ship_blob_checksum() {
    std::uint64_t size = static_cast<std::uint64_t>(sky_ship_blob_end - sky_ship_blob_begin);
    std::uint64_t sum = size;
    for (std::uint64_t i = 0; i < size; i += 4096)
        sum = sum * 1099511628211ull + sky_ship_blob_begin[i];
    return sum;
}

/*
 * ProcessPrng for Wine before 8.13, which has no bcryptprimitives.dll (Debian 12 ships 8.0).
 * Rust's standard library imports ProcessPrng from it (Windows 10 and later), so without this
 * DLL no Rust test binary for x86_64-pc-windows-gnu starts under that Wine. CI builds it with
 * mingw-w64 into the Wine prefix's system32 (`.ci/run`, the Windows step); it is never shipped.
 * The bytes come from RtlGenRandom (advapi32's SystemFunction036), which Wine implements.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}

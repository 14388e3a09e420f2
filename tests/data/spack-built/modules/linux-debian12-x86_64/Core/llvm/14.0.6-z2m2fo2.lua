-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.254858
--
-- llvm@14.0.6+clang~cuda~flang+gold+libomptarget~libomptarget_debug~link_llvm_dylib~lld~lldb+llvm_dylib+lua~mlir+polly~python~split_dwarf~utils~z3 build_system=cmake build_type=Release compiler-rt=runtime generator=ninja libcxx=runtime libunwind=runtime openmp=runtime shlib_symbol_version=none targets:=all version_suffix=none platform=linux os=debian12 target=x86_64/z2m2fo2
--

whatis([[Name : llvm]])
whatis([[Version : 14.0.6]])
whatis([[Target : x86_64]])
whatis([[Short description : The LLVM Project is a collection of modular and reusable compiler and toolchain technologies. Despite its name, LLVM has little to do with traditional virtual machines, though it does provide helpful libraries that can be used to build them. The name 'LLVM' itself is not an acronym; it is the full name of the project. ]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : llvm]])
help([[Version: 14.0.6]])
help([[Target : x86_64]])
help()
help([[The LLVM Project is a collection of modular and reusable compiler and
toolchain technologies. Despite its name, LLVM has little to do with
traditional virtual machines, though it does provide helpful libraries
that can be used to build them. The name "LLVM" itself is not an
acronym; it is the full name of the project.]])

-- Services provided by the package
family("compiler")

-- Loading this module unlocks the path below unconditionally
prepend_path("MODULEPATH", "$SPACK_RUN/env/modules/linux-debian12-x86_64/llvm/14.0.6")



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
setenv("CC", "/usr/bin/clang")
setenv("CXX", "/usr/bin/clang++")
append_path("MANPATH", "", ":")


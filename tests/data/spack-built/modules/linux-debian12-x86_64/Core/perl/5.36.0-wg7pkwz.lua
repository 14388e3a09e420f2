-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.776544
--
-- perl@5.36.0~cpanm+opcode+open+shared+threads build_system=generic platform=linux os=debian12 target=x86_64/wg7pkwz
--

whatis([[Name : perl]])
whatis([[Version : 5.36.0]])
whatis([[Target : x86_64]])
whatis([[Short description : Perl 5 is a highly capable, feature-rich programming language with over 27 years of development.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : perl]])
help([[Version: 5.36.0]])
help([[Target : x86_64]])
help()
help([[Perl 5 is a highly capable, feature-rich programming language with over
27 years of development.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")


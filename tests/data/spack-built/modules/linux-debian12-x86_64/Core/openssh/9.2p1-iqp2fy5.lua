-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.562946
--
-- openssh@9.2p1+gssapi build_system=autotools platform=linux os=debian12 target=x86_64/iqp2fy5
--

whatis([[Name : openssh]])
whatis([[Version : 9.2p1]])
whatis([[Target : x86_64]])
whatis([[Short description : OpenSSH is the premier connectivity tool for remote login with the SSH protocol. It encrypts all traffic to eliminate eavesdropping, connection hijacking, and other attacks. In addition, OpenSSH provides a large suite of secure tunneling capabilities, several authentication methods, and sophisticated configuration options. ]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : openssh]])
help([[Version: 9.2p1]])
help([[Target : x86_64]])
help()
help([[OpenSSH is the premier connectivity tool for remote login with the SSH
protocol. It encrypts all traffic to eliminate eavesdropping, connection
hijacking, and other attacks. In addition, OpenSSH provides a large
suite of secure tunneling capabilities, several authentication methods,
and sophisticated configuration options.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")


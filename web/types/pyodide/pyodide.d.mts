// web/dist/pyodide/pyodide.mjs is the pyodide package's pyodide.mjs (build.py copies it): its types
export * from "pyodide";

"""The message browser's data side, free of HTTP: what a browse request asks for (`query`), reading the records it
names with a Consumer that assigns and seeks (`reader`), showing keys, values and headers (JSON pretty-printed,
Confluent's wire format decoded through the schema registry, binary as hex and base64: `decoding`), and producing a
record from the console's form (`producing`)."""

// attnc-read-bandwidth --page-orders (PageOrders.cpp).
#ifndef ATTNC_TOOLS_READBANDWIDTH_PAGEORDERS_H
#define ATTNC_TOOLS_READBANDWIDTH_PAGEORDERS_H

// Prints one thread's read rate over a paged KV cache in each order measured; 0 on success.
int pageOrders();

#endif // ATTNC_TOOLS_READBANDWIDTH_PAGEORDERS_H
